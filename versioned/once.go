package versioned

import (
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/once"
)

// checkScope refuses the scopes documents and feeds do not take.
func checkScope(s tipkv.Scope) error {
	if err := s.Check(); err != nil {
		return err
	}
	if s.Kind() == tipkv.ScopeUntilDone {
		return fmt.Errorf("%w: UntilDone is a queue message's scope: use a Window or UntilForgotten", tipkv.ErrInvalid)
	}
	return nil
}

func onceOp(space, name, key string, scope tipkv.Scope, content []byte) once.Op {
	return once.Op{
		Space: space, Name: name, Key: key,
		Kind: once.Kind(scope.Kind()), Window: int64(scope.Duration()),
		Hash: once.Hash(content),
	}
}

// writeOnce runs the guarded write in w: peek on a DB, then check, write
// and finish in the Tx. write returns the result it produced.
func writeOnce(w tipkv.Writer, ln *link.DB, op *once.Op, write func(*link.Tx) (int64, error)) (int64, bool, error) {
	if tx, err := link.TxOf(w); err == nil && tx == nil {
		if r, held, err := op.Peek(ln.Store, ln.Clock().UnixNano()); err != nil || held {
			return r, held, err
		}
	}
	var res int64
	var dup bool
	err := link.Write(w, func(tx *link.Tx) error {
		if tx.DB != ln {
			return fmt.Errorf("%w: the Batch belongs to another DB", tipkv.ErrInvalid)
		}
		first, held, err := op.Check(tx)
		if err != nil {
			return err
		}
		if held {
			res, dup = first, true
			return nil
		}
		if first, err = write(tx); err != nil {
			return err
		}
		res, dup = first, false
		return op.Finish(tx, first)
	})
	if err != nil {
		return 0, false, err
	}
	return res, dup, nil
}

// AppendOnce appends event to stream unless the idempotency key holds in
// that stream: then it writes nothing and returns the position the first
// AppendOnce with the key wrote, and dup true. scope is tipkv.Window(d)
// or tipkv.UntilForgotten (tipkv.Scope's table); UntilDone is
// tipkv.ErrInvalid. The same key with another event (its encoding
// differs) while the key holds is tipkv.ErrIdempotencyMismatch. The key
// does not follow the event: Trim and retention leave it, and it goes on
// returning a position that may be gone.
//
// The key's record commits in the batch of the event, with the condition
// that it is absent (or as read): two AppendOnce calls with one key, in
// one process or two on a shared engine, append one event; the other
// runs again and finds it. An Update whose function calls AppendOnce may
// therefore run its function again on any engine (tipkv.DB.Update). On a
// *tipkv.DB a key that holds is found with one read and no write.
func (f *Feed[T]) AppendOnce(w tipkv.Writer, stream, key string, scope tipkv.Scope, event T) (pos int64, dup bool, err error) {
	if err := checkName("stream", stream); err != nil {
		return 0, false, err
	}
	fail := func(err error) (int64, bool, error) {
		return 0, false, fmt.Errorf("stream %q: append once: %w", stream, err)
	}
	if err := checkScope(scope); err != nil {
		return fail(err)
	}
	if err := once.CheckKey(key); err != nil {
		return fail(err)
	}
	val, err := f.codec.Append(nil, event)
	if err != nil {
		return fail(err)
	}
	if err := checkValue(val); err != nil {
		return fail(err)
	}
	op := onceOp(once.SpaceStream, stream, key, scope, val)
	pos, dup, err = writeOnce(w, f.w.ln, &op, func(tx *link.Tx) (int64, error) {
		return f.appendTx(tx, stream, 0, val)
	})
	if err != nil {
		return fail(err)
	}
	return pos, dup, nil
}

// ForgetKey ends the idempotency key in stream, whatever its scope: the
// next AppendOnce with it appends anew. It reports whether the key held.
// Events stay.
func (f *Feed[T]) ForgetKey(w tipkv.Writer, stream, key string) (bool, error) {
	return forget(w, f.w.ln, once.SpaceStream, stream, key)
}

// PutOnce writes doc as the next version of id, as Put does, unless the
// idempotency key holds in this collection: then it writes nothing and
// returns the version the first PutOnce with the key wrote, and dup true.
// Keys are per collection, not per document: the content compared is the
// id and the document's encoding, so the same key for another id or
// another document, while it holds, is tipkv.ErrIdempotencyMismatch.
// scope is tipkv.Window(d) or tipkv.UntilForgotten (tipkv.Scope's table);
// UntilDone is tipkv.ErrInvalid. The key does not follow the document:
// Delete, Purge and pruning leave it.
//
// The key's record commits in the batch of the version, with the
// condition that it is absent (or as read), so two PutOnce calls with
// one key write one version; the other runs again and finds it. An
// Update whose function calls PutOnce may therefore run its function
// again on any engine (tipkv.DB.Update). On a *tipkv.DB a key that holds
// is found with one read and no write.
func (c *Collection[T]) PutOnce(w tipkv.Writer, id, key string, scope tipkv.Scope, doc T) (version int64, dup bool, err error) {
	if err := checkScope(scope); err != nil {
		return 0, false, fmt.Errorf("%s: put once: %w", c.where(id), err)
	}
	if err := once.CheckKey(key); err != nil {
		return 0, false, fmt.Errorf("%s: put once: %w", c.where(id), err)
	}
	op, err := c.newPut(id, doc, -1)
	if err != nil {
		return 0, false, err
	}
	defer c.freePut(op)
	content := codec.AppendString(nil, id)
	content = append(content, op.buf[op.docAt:]...)
	oop := onceOp(once.SpaceCollection, c.name, key, scope, content)
	version, dup, err = writeOnce(w, c.w.ln, &oop, func(tx *link.Tx) (int64, error) {
		op.v = 0
		if err := op.write(tx); err != nil {
			return 0, err
		}
		return op.v, nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("%s: put once: %w", c.where(id), err)
	}
	return version, dup, nil
}

// ForgetKey ends the idempotency key in this collection, whatever its
// scope: the next PutOnce with it writes anew. It reports whether the key
// held. Documents stay.
func (c *Collection[T]) ForgetKey(w tipkv.Writer, key string) (bool, error) {
	return forget(w, c.w.ln, once.SpaceCollection, c.name, key)
}

func forget(w tipkv.Writer, ln *link.DB, space, name, key string) (bool, error) {
	var held bool
	err := link.Write(w, func(tx *link.Tx) error {
		if tx.DB != ln {
			return fmt.Errorf("%w: the Batch belongs to another DB", tipkv.ErrInvalid)
		}
		var err error
		held, err = once.Forget(tx, space, name, key)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%s %q: forget %q: %w", space, name, key, err)
	}
	return held, nil
}
