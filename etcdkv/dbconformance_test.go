package etcdkv_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/tipkvtest"
)

// dbScale divides the suite's sizes: by 4 in the full run, by 16 with
// -short (CI). Under -race an etcd round trip costs several times what it
// costs without (the members run in this process, instrumented too). With
// -race on a 2-core machine shared with other builds, the suite took 4.5
// minutes at a quarter of the sizes (load 15; the queue model 2 of them),
// 3.5 at an eighth (load 20), 45 s at a sixteenth (load 8). The models
// draw new seeds on every run, so CI covers more over time.
func dbScale() int {
	if testing.Short() {
		return 16
	}
	return 4
}

// The tipkv conformance suite (documents, feeds, queues, the outbox,
// misuse) on the test cluster: every test a DB on a namespace of its own;
// Reopen closes the DB and opens the namespace again, as a restarted
// process would; Second opens another DB with its own client on the same
// namespace, as another process would.
func TestConformanceDB(t *testing.T) {
	var mu sync.Mutex
	nss := map[*tipkv.DB]string{}
	open := func(t testing.TB, ns string, opts *tipkv.Options) *tipkv.DB {
		t.Helper()
		db, err := etcdkv.Open(context.Background(), etcdkv.Config{
			Endpoints: etcdkv.ClusterForTest().Endpoints(),
			Namespace: ns,
		}, opts)
		require.NoError(t, err)
		mu.Lock()
		nss[db] = ns
		mu.Unlock()
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	nsOf := func(db *tipkv.DB) string {
		mu.Lock()
		defer mu.Unlock()
		return nss[db]
	}
	tipkvtest.Run(t, tipkvtest.Backend{
		Name: "etcd",
		Open: func(t testing.TB, opts *tipkv.Options) *tipkv.DB {
			return open(t, etcdkv.NamespaceForTest(t), opts)
		},
		Reopen: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			ns := nsOf(db)
			_ = db.Close()
			return open(t, ns, opts)
		},
		Second: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			return open(t, nsOf(db), opts)
		},
		Scale: dbScale(),
	})
}
