package tipkv

import (
	"context"
	"fmt"
	"time"

	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/once"
)

// Scope is how long an idempotency key holds: while it holds, a write
// guarded by it (queue's EnqueueOnce, versioned's AppendOnce and PutOnce)
// is made once, and every later one returns the first one's result. Make
// one with Window, UntilDone or UntilForgotten; the zero Scope is
// refused with ErrInvalid. The package doc's "Writes that are safe to
// repeat" has the one table of what every event does to a key of each
// scope. A Scope is a value, safe to share.
type Scope struct {
	kind   once.Kind
	window time.Duration
}

// ScopeKind says which of the three scopes a Scope is.
type ScopeKind uint8

// The kinds of scope.
const (
	// ScopeWindow holds a key for a fixed time after its write.
	ScopeWindow = ScopeKind(once.Window)
	// ScopeUntilDone holds a queue message's key until the message is
	// consumed (acknowledged, popped, discarded) or requeued.
	ScopeUntilDone = ScopeKind(once.UntilDone)
	// ScopeUntilForgotten holds a key until Forget.
	ScopeUntilForgotten = ScopeKind(once.UntilForgotten)
)

// Window is the scope that holds a key for d after the commit of its
// write; then the sweep deletes it. d must be positive.
func Window(d time.Duration) Scope { return Scope{kind: once.Window, window: d} }

// UntilDone is the scope of a queue message's key: it holds while the
// message is in the queue (ready, leased, delayed or a dead letter), and
// ends when it is acknowledged, popped or discarded, or requeued from the
// dead letters. Only queue.EnqueueOnce takes it.
func UntilDone() Scope { return Scope{kind: once.UntilDone} }

// UntilForgotten is the scope that holds a key until Forget deletes it.
// Nothing sweeps such keys: forget them, or prefer a Window.
func UntilForgotten() Scope { return Scope{kind: once.UntilForgotten} }

// Kind returns the scope's kind, 0 for the zero Scope.
func (s Scope) Kind() ScopeKind { return ScopeKind(s.kind) }

// Duration returns a Window scope's length, 0 for the others.
func (s Scope) Duration() time.Duration { return s.window }

// String returns "window(1m0s)", "until-done" or "until-forgotten".
func (s Scope) String() string {
	if s.kind == once.Window {
		return fmt.Sprintf("window(%s)", s.window)
	}
	return s.kind.String()
}

// Check returns an error matching ErrInvalid for a Scope no write takes:
// the zero Scope, or a Window that is not positive.
func (s Scope) Check() error {
	switch {
	case s.kind == 0:
		return fmt.Errorf("%w: the zero Scope: use Window, UntilDone or UntilForgotten", ErrInvalid)
	case s.kind == once.Window && s.window <= 0:
		return fmt.Errorf("%w: Window(%s): not positive", ErrInvalid, s.window)
	}
	return nil
}

// SweepStats says what DB.SweepKeys did.
type SweepStats struct {
	// Windowed is the number of keys deleted whose window had ended.
	Windowed int
	// Done is the number of UntilDone keys deleted whose message was
	// consumed.
	Done int
	// Entries is the number of index entries walked.
	Entries int
}

// SweepKeys deletes the idempotency keys that no longer hold: those whose
// Window ended by the DB's clock, and the UntilDone keys of messages
// consumed below their queue's head. A DB that wrote a key does this in
// the background every minute; SweepKeys runs a pass now, for a test or a
// maintenance job. It walks only the ended keys (an index by time, and a
// queue's keys below its head), deletes their index with one range delete
// per batch of 48, and each key on the condition that it is as read, so a
// key written again meanwhile stays. It stops between batches when ctx
// ends. It is safe for concurrent use; passes of one DB run one at a time.
func (db *DB) SweepKeys(ctx context.Context) (SweepStats, error) {
	ln, err := link.Of(db)
	if err != nil {
		return SweepStats{}, err
	}
	if ln.ReadOnly {
		return SweepStats{}, fmt.Errorf("%w: sweep keys: the DB is read-only", ErrInvalid)
	}
	st, err := once.Sweep(ctx, ln)
	if err != nil {
		err = fmt.Errorf("sweep keys: %w", err)
	}
	return SweepStats{Windowed: st.Windowed, Done: st.Done, Entries: st.Entries}, err
}
