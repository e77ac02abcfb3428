package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// sharedStore makes a shared in-memory store that testEngines opens as
// "shared:"+name, fills it through a DB of its own with fill, and returns
// the STORE argument. A handle stays open until the test ends, as a
// running service's would.
func sharedStore(t *testing.T, name string, fill func(db *tipkv.DB)) string {
	t.Helper()
	ps, err := pebblestore.Open(name, pebblestore.Config{InMemory: true, CacheSize: 1 << 20, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	hub := sharedstore.New(ps, sharedstore.Options{})
	held := hub.Handle() // the service's: the store lives while a handle is open
	t.Cleanup(func() { _ = held.Close() })
	target := "shared:" + name
	sharedStores.Lock()
	sharedStores.m[target] = hub
	sharedStores.Unlock()
	t.Cleanup(func() {
		sharedStores.Lock()
		delete(sharedStores.m, target)
		sharedStores.Unlock()
	})
	db, err := tipkv.OpenEngine(hub.Handle(), target, &tipkv.Options{Clock: func() time.Time { return goldenWritten }})
	require.NoError(t, err)
	fill(db)
	require.NoError(t, db.Close())
	return target
}

// The commands that read reach a store of a shared engine that an Engine
// of Options.Engines opens, as they read a Pebble directory; compact and
// backup, which only Pebble has, are refused before anything is opened;
// and a store the engine does not hold is reported as no store, exit 2.
func TestSharedEngineStore(t *testing.T) {
	type user struct {
		Name string `msgpack:"name"`
	}
	target := sharedStore(t, "live", func(db *tipkv.DB) {
		users, err := versioned.NewCollection[user](db, "users", nil)
		require.NoError(t, err)
		for _, n := range []string{"Al", "Alice"} {
			_, err = users.Put(db, "alice", user{n})
			require.NoError(t, err)
		}
		jobs, err := queue.Open[string](db, "jobs", nil)
		require.NoError(t, err)
		_, err = jobs.Enqueue(db, "a", "b")
		require.NoError(t, err)
	})

	out := cliOK(t, "history", target, "users", "alice")
	require.Equal(t, `VERSION  TIME                            VALUE
2        2025-03-01T13:30:00.000000001Z  {"name":"Alice"}
1        2025-03-01T13:30:00Z            {"name":"Al"}
`, out, "one clock reading, forced 1 ns past the version before")
	m := jsonOf(t, cliOK(t, "queue", "--json", target, "jobs"))
	require.EqualValues(t, 2, m["depth"], "%v", m)
	out = cliOK(t, "stats", target)
	require.Contains(t, out, target)
	require.Contains(t, out, "users")
	cliOK(t, "check", target)
	require.Equal(t, 3, strings.Count(cliOK(t, "dump", "--family", "versions", target), "\n"), "a header and two versions")

	for _, args := range [][]string{{"compact", target}, {"backup", target, t.TempDir() + "/copy"}} {
		_, errOut, code := cli(t, args...)
		require.Equal(t, exitUsage, code, "%v", args)
		require.Contains(t, errOut, "works on a Pebble directory")
	}
	_, errOut, code := cli(t, "stats", "shared:none")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "no tipkv store")
}
