// Package tipkvtest is tipkv's conformance suite: the tests every engine
// must pass under tipkv's packages (documents, feeds, followers, queues,
// the outbox, the model tests, close and misuse), run on DBs that
// tipkv.OpenEngine makes on the engine's stores. An engine's test package
// runs it with the same harness it gives the contract's own suite:
//
//	func TestConformance(t *testing.T) {
//		h := enginetest.Harness{Name: "mine", Open: openStore, Reopen: reopenStore}
//		enginetest.Run(t, h) // the contract, store by store
//		tipkvtest.Run(t, h)  // tipkv on top of it
//	}
//
// The core module runs it on Pebble (exclusive) and on a shared Pebble
// mode (several handles on one store, each declaring a shared engine,
// standing in for several processes); etcdkv and sqlkv run it on their
// engines; examples/memengine on an engine written outside this module. A
// test that holds on one kind of engine only says so and skips on the
// others (Caps tells which).
package tipkvtest

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
)

// Harness is how the suite reaches an engine: enginetest's, so that one
// harness runs both suites.
type Harness = enginetest.Harness

// backend is what the tests ask of a harness, in DBs.
type backend struct {
	// Name names the engine.
	Name string

	// Open returns a DB on a new, empty store. opts may be nil. It is
	// closed when the test ends (a test may close it first).
	Open func(t testing.TB, opts *tipkv.Options) *tipkv.DB

	// Reopen returns a new DB on the store of db, as a process restarting
	// would see it, after closing db. Nil if the harness cannot.
	Reopen func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB

	// Second returns another DB on the store of db, as another process
	// would open it, with memory of its own. Nil for exclusive engines. It
	// is closed when the test ends.
	Second func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB

	// Scale divides the sizes of the heavier tests. 0 or 1: full size.
	Scale int
}

// backendOf makes DBs with tipkv.OpenEngine on the stores of h.
func backendOf(h Harness) backend {
	name := h.Name
	if name == "" {
		name = "engine"
	}
	openOn := func(t testing.TB, s engine.Store, opts *tipkv.Options) *tipkv.DB {
		t.Helper()
		db, err := tipkv.OpenEngine(s, name, opts)
		if err != nil {
			_ = s.Close()
		}
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	storeOf := func(t testing.TB, db *tipkv.DB) engine.Store {
		s, err := link.StoreOf(db)
		require.NoError(t, err)
		return s
	}
	b := backend{
		Name:  name,
		Scale: h.Scale,
		Open: func(t testing.TB, opts *tipkv.Options) *tipkv.DB {
			return openOn(t, h.Open(t), opts)
		},
	}
	if h.Reopen != nil {
		b.Reopen = func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			s := storeOf(t, db)
			_ = db.Close()
			return openOn(t, h.Reopen(t, s), opts)
		}
	}
	if h.Second != nil {
		b.Second = func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			return openOn(t, h.Second(t, storeOf(t, db)), opts)
		}
	}
	return b
}

// N scales a test size for the backend, never below 1.
func (b backend) N(full int) int {
	if b.Scale > 1 {
		return max(full/b.Scale, 1)
	}
	return full
}

// Caps returns the caps of db's engine.
func Caps(t testing.TB, db *tipkv.DB) engine.Caps {
	t.Helper()
	s, err := link.StoreOf(db)
	if err != nil {
		t.Fatal(err)
	}
	return s.Caps()
}

// testCase is one conformance test.
type testCase struct {
	Name string
	F    func(t *testing.T, b backend)
}

// Run runs every suite on DBs made on the stores of h. Some tests move
// tipkv's internal test settings for their duration (to drive a path the
// defaults leave cold), so Run must not run in parallel with other tests
// of tipkv in the same process.
func Run(t *testing.T, h Harness) {
	b := backendOf(h)
	for _, suite := range []struct {
		name  string
		cases []testCase
	}{
		{"Documents", append(documentCases(), documentTTLCases()...)},
		{"Feeds", append(feedCases(), feedRetentionCases()...)},
		{"Follow", followCases()},
		{"Groups", groupCases()},
		{"Members", memberCases()},
		{"Queues", slices.Concat(queueCases(), queueConcurrencyCases(), queueControlCases(), queueGroupCases())},
		{"Outbox", outboxCases()},
		{"Misuse", misuseCases()},
		{"Once", onceCases()},
	} {
		t.Run(suite.name, func(t *testing.T) {
			for _, c := range suite.cases {
				t.Run(c.Name, func(t *testing.T) { c.F(t, b) })
			}
		})
	}
}

// Healthy fails the test unless the store of db passes every invariant of
// package check (keys, dense versions, queue heads, tails and dead
// letters). Every conformance test ends with it.
func Healthy(t testing.TB, db *tipkv.DB) {
	t.Helper()
	s, err := link.StoreOf(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Store(s, check.Options{FormatVersion: tipkv.FormatVersion}).Err(); err != nil {
		t.Fatal(err)
	}
}

// OpenShared returns n DBs on one in-memory store, each declaring a
// shared engine and keeping memory of its own: as n processes sharing an
// etcd cluster or a SQL table would, in one test process and without a
// server. Code that runs on a shared engine can be tested on them (their
// writes carry conditions, Update retries, waits poll or watch). opts may
// be nil. The DBs are closed when the test ends.
func OpenShared(t testing.TB, n int, opts *tipkv.Options) []*tipkv.DB {
	t.Helper()
	b := backendOf(testutil.SharedHarness("shared", sharedstore.Options{}))
	dbs := make([]*tipkv.DB, n)
	for i := range dbs {
		if i == 0 {
			dbs[i] = b.Open(t, opts)
		} else {
			dbs[i] = b.Second(t, dbs[0], opts)
		}
	}
	return dbs
}

// checked runs a test with a backend that remembers the DBs it hands out,
// and ends it as every conformance test ends: each store the test left
// open checked healthy (Healthy).
func checked(f func(*testing.T, backend)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		var mu sync.Mutex
		var dbs []*tipkv.DB
		keep := func(db *tipkv.DB) *tipkv.DB {
			mu.Lock()
			defer mu.Unlock()
			dbs = append(dbs, db)
			return db
		}
		rb := b
		rb.Open = func(t testing.TB, opts *tipkv.Options) *tipkv.DB { return keep(b.Open(t, opts)) }
		if b.Reopen != nil {
			rb.Reopen = func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB { return keep(b.Reopen(t, db, opts)) }
		}
		if b.Second != nil {
			rb.Second = func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB { return keep(b.Second(t, db, opts)) }
		}
		f(t, rb)
		if t.Failed() {
			return
		}
		for _, db := range dbs {
			if s, err := link.StoreOf(db); err == nil {
				if _, err := s.Get(metaFormatKey); errors.Is(err, engine.ErrClosed) {
					continue // closed by the test
				}
			}
			Healthy(t, db)
		}
	}
}

// withKnob runs f with *k, one of internal/knobs' settings, set to v: a
// variant of a test that drives a path the default leaves cold. The knob
// is restored in a cleanup registered before f opens its DBs, so after
// they are closed and nothing reads it.
func withKnob[T any](k *T, v T, f func(*testing.T, backend)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		t.Cleanup(knobs.Set(k, v))
		f(t, b)
	}
}

// spawn runs f in a goroutine counted by wg.
func spawn(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
	}()
}
