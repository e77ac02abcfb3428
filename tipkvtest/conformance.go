// Package tipkvtest holds the bodies of the tests every backend of tipkv
// must pass: documents, feeds, queues, the outbox, the model tests, close
// and misuse. A backend's test package runs them:
//
//	func TestConformance(t *testing.T) {
//		tipkvtest.Run(t, tipkvtest.Backend{Name: "etcd", Open: ..., Second: ...})
//	}
//
// The core module runs them on Pebble (exclusive) and on a shared Pebble
// mode (several DB handles on one store, each declaring a shared engine,
// standing in for several processes); etcdkv and sqlkv run them on their
// engines. A test that holds on one kind of engine only says so and skips
// on the others (Caps tells which).
package tipkvtest

import (
	"testing"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/link"
)

// Backend is how the tests reach an engine.
type Backend struct {
	// Name names the backend in test output.
	Name string

	// Open returns a DB on a new, empty store (a fresh namespace on a
	// shared engine). opts may be nil. The backend closes it when the test
	// ends (a test may close it first).
	Open func(t testing.TB, opts *tipkv.Options) *tipkv.DB

	// Reopen returns a new DB on the store of db, as a process restarting
	// would see it, after db is closed (Reopen closes it if it is open).
	// Nil if the backend cannot.
	Reopen func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB

	// Second returns another DB handle on the store of db, as another
	// process would open it, with memory of its own. Nil for exclusive
	// engines. The backend closes it when the test ends.
	Second func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB

	// Scale divides the sizes of the heavier tests, for slow engines. 0 or
	// 1: full size.
	Scale int
}

// N scales a test size for the backend, never below 1.
func (b Backend) N(full int) int {
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

// Case is one conformance test.
type Case struct {
	Name string
	F    func(t *testing.T, b Backend)
}

// Run runs every suite on b.
func Run(t *testing.T, b Backend) {
	for _, suite := range []struct {
		name  string
		cases []Case
	}{
		{"Documents", append(documentCases(), documentTTLCases()...)},
		{"Feeds", append(feedCases(), feedRetentionCases()...)},
		{"Follow", followCases()},
		{"Queues", queueCases()},
		{"Outbox", outboxCases()},
		{"Misuse", misuseCases()},
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
