package queue

import (
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/once"
)

// EnqueueOnce enqueues item unless the idempotency key holds in this
// queue: then it writes nothing and returns the sequence number the first
// EnqueueOnce with the key assigned, and dup true. It is for a producer
// that may send one message twice (an at-least-once relay, an HTTP
// retry): the second send finds the first. scope says how long the key
// holds (see tipkv.Scope's table): tipkv.UntilDone while the message is in
// the queue (a dead letter included), tipkv.Window(d) for d after the
// commit, tipkv.UntilForgotten until Forget. The same key with another
// item (its encoding differs) while the key holds is
// tipkv.ErrIdempotencyMismatch, and nothing is written.
//
// The key's record is written in the batch of the message, with the
// condition that it is still absent (or as it was read, when a record
// that no longer holds is replaced): the two commit together or not at
// all, on every engine, inside an Update too. Two EnqueueOnce calls with
// one key, in one process or in two sharing an engine, enqueue one
// message: the one that commits second fails its condition and runs
// again, and finds the first. So on every engine, Pebble included, an
// Update whose function calls EnqueueOnce may run its function again
// (tipkv.DB.Update); keep it free of other side effects. A duplicate
// inside an Update requires the key's record as read, so the Update's
// other writes commit only while the key holds.
//
// The sequence number of a message it enqueues is what Enqueue would
// return for it, inside an Update too (see Enqueue); with an error it
// returns 0.
//
// On a *tipkv.DB, a key that holds is found with one read of its record,
// and no write is made; an UntilDone key then asks whether its message
// lives, on Pebble from the queue's memory when it knows (the message is
// in the queue), otherwise with a read of the message. A key is at most once.MaxKeySize (1,024) bytes; an empty key, a
// longer one or the zero Scope is tipkv.ErrInvalid.
func (q *Queue[T]) EnqueueOnce(w tipkv.Writer, key string, scope tipkv.Scope, item T) (seq int64, dup bool, err error) {
	return q.EnqueueOnceWith(w, key, scope, EnqueueOptions{}, item)
}

// EnqueueOnceWith is EnqueueOnce with EnqueueWith's options: headers, a
// visible-at time and a group. Only the item's encoding is compared with
// the first write's: headers (a retry's new trace context), times and
// groups may differ.
func (q *Queue[T]) EnqueueOnceWith(w tipkv.Writer, key string, scope tipkv.Scope, opts EnqueueOptions, item T) (seq int64, dup bool, err error) {
	seq, dup, err = q.enqueueOnce(w, key, scope, opts, item)
	if err != nil {
		return 0, false, fmt.Errorf("queue %q: enqueue once: %w", q.c.name, err)
	}
	return seq, dup, nil
}

func (q *Queue[T]) enqueueOnce(w tipkv.Writer, key string, scope tipkv.Scope, opts EnqueueOptions, item T) (int64, bool, error) {
	if err := scope.Check(); err != nil {
		return 0, false, err
	}
	if err := once.CheckKey(key); err != nil {
		return 0, false, err
	}
	hs, err := encodeHeaders(opts.Headers)
	if err == nil {
		err = checkGroup(opts.Group)
	}
	if err != nil {
		return 0, false, err
	}
	if err := checkAt(opts.At); err != nil {
		return 0, false, err
	}
	eb := encodeBufs.Get().(*encodeBuf)
	defer eb.put()
	// The key compares the item's encoding only (headers and times may
	// differ between retries); the item is encoded again with its header
	// inside the write, at the Tx's commit time.
	payload, err := q.codec.Append(eb.buf[:0], item)
	if err != nil {
		return 0, false, err
	}
	eb.buf = payload
	op := once.Op{
		Space: once.SpaceQueue, Name: q.c.name, Key: key,
		Kind: once.Kind(scope.Kind()), Window: int64(scope.Duration()),
		Hash: once.Hash(payload),
	}
	if q.c.sm == nil {
		op.Lives = q.c.itemLives
	}
	if tx, err := link.TxOf(w); err == nil && tx == nil {
		// On the DB: a key that holds needs no Tx.
		if seq, held, err := op.Peek(q.c.store, q.c.clock().UnixNano()); err != nil || held {
			return seq, held, err
		}
	}
	var seq int64
	var dup bool
	f := func(tx *link.Tx) error {
		if err := q.c.owns(tx); err != nil {
			return err
		}
		first, held, err := op.Check(tx)
		if err != nil {
			return err
		}
		if held {
			seq, dup = first, true
			return nil
		}
		if err := q.encode(tx, eb, opts.At, hs, []byte(opts.Group), []T{item}); err != nil {
			return err
		}
		if first, err = q.put(tx, eb); err != nil {
			return err
		}
		seq, dup = first, false
		return op.Finish(tx, first)
	}
	if q.c.sm != nil {
		err = q.c.write(w, f)
	} else {
		err = link.Write(w, f)
	}
	if err != nil {
		return 0, false, err
	}
	return seq, dup, nil
}

// ForgetKey ends the idempotency key in this queue, whatever its scope: the
// next EnqueueOnce with it enqueues anew. It reports whether the key held.
// The message it guarded stays in the queue. Forget requires the key's
// record as it read it, as EnqueueOnce does; forgetting a key written
// earlier in the same Update is tipkv.ErrInvalid.
func (q *Queue[T]) ForgetKey(w tipkv.Writer, key string) (bool, error) {
	var held bool
	f := func(tx *link.Tx) error {
		if err := q.c.owns(tx); err != nil {
			return err
		}
		var err error
		held, err = once.Forget(tx, once.SpaceQueue, q.c.name, key)
		return err
	}
	var err error
	if q.c.sm != nil {
		err = q.c.write(w, f)
	} else {
		err = link.Write(w, f)
	}
	if err != nil {
		return false, fmt.Errorf("queue %q: forget %q: %w", q.c.name, key, err)
	}
	return held, nil
}
