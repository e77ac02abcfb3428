package engine

import (
	"bytes"
	"context"

	"github.com/tipkv/tipkv/codec"
)

// Locker is implemented by shared engines that can make writers of one
// document, stream or queue wait for each other instead of failing
// conditions (PostgreSQL's advisory locks). Optimistic writers of a hot
// key keep losing the race between their read and their commit; writers
// that take its lock first read it in turn.
//
// The locks are advisory: they order the callers of Lock and nothing
// else. A batch's conditions are checked as always, and a writer that
// holds no lock commits as before (a lock only makes losing rare). Each
// lock is exclusive across every process on the store and every goroutine
// of this one.
type Locker interface {
	// Lock blocks until the caller holds the locks of prefixes, each a
	// key's prefix as LockPrefix gives it, then returns unlock, which
	// releases them all (call it once, from any goroutine), and whether
	// it had to wait for another holder. A caller asks for every lock it
	// needs in one call, and releases them before asking for more: locks
	// taken one at a time could deadlock. An engine that cannot lock
	// here (a dialect without advisory locks) fails with an error
	// matching errors.ErrUnsupported; the caller then writes without.
	Lock(ctx context.Context, prefixes [][]byte) (unlock func(), waited bool, err error)
}

// LockPrefix is what a lock on key covers: its codec.Split prefix (a
// document, a stream, a queue's items), or the whole key for a key of an
// unnumbered family (a queue's state).
func LockPrefix(key []byte) []byte {
	return bytes.Clone(key[:codec.Split(key)])
}

// LockHolding is implemented by the batches of an engine that is a
// Locker, so that writers which have not collided yet give way to a lock's
// holder instead of overtaking it. Without it, a holder reads and commits
// in turn only among the writers that asked for the lock; a writer that
// starts lock-free can read the same version and commit first, as often
// as it likes, and the holder fails again.
//
// Hold tells the batch, before Apply, which prefixes its writer holds
// locks on (LockPrefix form; none is an empty list). Apply then fails, as
// a *ConditionError naming the condition's key, when a condition is on a
// key whose prefix is not among them and another caller of Lock holds or
// waits for that prefix's lock: the writer asks for the lock and queues
// behind the holder. The check is made in the commit itself, so it costs
// no round trip. A batch never told Hold checks nothing more.
type LockHolding interface {
	Hold(prefixes [][]byte)
}
