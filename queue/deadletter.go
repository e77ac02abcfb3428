package queue

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// DeadLetter is a message that was delivered MaxAttempts times without
// being acknowledged, or whose stored value did not decode. It keeps the
// sequence number it had in the queue.
type DeadLetter[T any] struct {
	Seq      int64
	Value    T
	Attempts int       // deliveries before it was moved
	Enqueued time.Time // when it was first enqueued
	Died     time.Time // when it was moved to the dead-letter queue
	Headers  Headers   // what the producer gave EnqueueWith, nil if nothing
	Group    string    // the message group (EnqueueOptions.Group), "" for none

	meta []byte // the encoded metadata, nil for none
}

// Metadata returns the metadata the message was enqueued with (see
// Message.Metadata).
func (d DeadLetter[T]) Metadata() (tipkv.Metadata, error) { return decodeMeta(d.meta, d.Seq) }

// HasMetadata reports whether the message was enqueued with metadata,
// without decoding it.
func (d DeadLetter[T]) HasMetadata() bool { return d.meta != nil }

// DeadLetters iterates over the queue's dead letters in [first, last],
// oldest sequence number first. Dead letters added or removed while it
// runs may or may not appear; it is safe to Requeue or Discard the one at
// hand inside the loop. An error (a value that does not decode matches
// tipkv.ErrCorrupt and names the key) is yielded once, as the last pair,
// with the dead letter's Seq set so that it can be discarded.
func (q *Queue[T]) DeadLetters() iter.Seq2[DeadLetter[T], error] {
	c := q.c
	return func(yield func(DeadLetter[T], error) bool) {
		it, err := c.store.NewIter(c.k.deadPrefix, c.k.deadEnd)
		if err != nil {
			yield(DeadLetter[T]{}, fmt.Errorf("queue %q: dead letters: %w", c.name, err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			var d DeadLetter[T]
			seq, err := seqOf(c.k.deadPrefix, it.Key())
			if err == nil {
				d.Seq = seq
				err = q.decodeDead(it, &d)
			}
			if err != nil {
				yield(d, fmt.Errorf("queue %q: dead letter %d (key %x): %w", c.name, d.Seq, it.Key(), err))
				return
			}
			if !yield(d, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(DeadLetter[T]{}, fmt.Errorf("queue %q: dead letters: %w", c.name, err))
		}
	}
}

func (q *Queue[T]) decodeDead(it engine.Iter, d *DeadLetter[T]) error {
	v, err := it.Value()
	if err != nil {
		return err
	}
	if len(v) > 0 && v[0] == deadRawFormat {
		return fmt.Errorf("%w: the message was moved here because its stored bytes were corrupt", tipkv.ErrCorrupt)
	}
	h, payload, err := parseHeader(v, deadFormat)
	if err != nil {
		return err
	}
	d.Attempts, d.Enqueued, d.Died = h.attempts, fromUnixNano(h.enqueued), fromUnixNano(h.at)
	d.Headers, d.meta, d.Group = decodeHeaders(h.headers), bytes.Clone(h.meta), string(h.group)
	if err := q.codec.Decode(payload, &d.Value); err != nil {
		return q.c.corrupt(d.Seq, err)
	}
	return nil
}

// Requeue moves the dead letters with the given sequence numbers back to
// the tail of the queue, in the order given, through w. They get new
// sequence numbers (a message of a group goes behind the group's others)
// and their attempt counts start again at zero; their
// values are copied as stored, without decoding. A sequence number that is
// not in the dead-letter queue is an error matching tipkv.ErrNotFound, one
// that another Requeue or Discard is moving now matches tipkv.ErrConflict,
// and then nothing is moved. On a shared engine the write requires each
// dead letter to be as read: of two processes moving one, only one
// commits, and the other (reading again) finds it gone. The new numbers
// are assigned as Enqueue assigns them there.
func (q *Queue[T]) Requeue(w tipkv.Writer, seqs ...int64) error {
	c := q.c
	err := c.withDead(w, seqs, func(tx *link.Tx, vals [][]byte) error {
		items := make([][]byte, len(vals))
		for i, v := range vals {
			h, payload, err := parseHeader(v, deadFormat)
			if err != nil {
				return fmt.Errorf("dead letter %d (key %x): %w", seqs[i], c.k.dead(nil, seqs[i]), err)
			}
			items[i] = append(appendHeader(nil, itemFormat, header{enqueued: h.enqueued, headers: h.headers, meta: h.meta, group: h.group}), payload...)
		}
		var first int64
		if c.sm != nil {
			start, err := c.allocShared(tx, len(items))
			if err != nil {
				return err
			}
			tx.OnCommit(c.notifyLocal)
			first = start
		} else {
			b, err := c.alloc(len(items))
			if err != nil {
				return err
			}
			tx.OnCommit(func() { c.resolve(b, true) })
			tx.OnAbort(func() { c.resolve(b, false) })
			first = b.start
		}
		for i, v := range items {
			if err := tx.Batch.Set(c.k.item(nil, first+int64(i)), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue %q: requeue: %w", c.name, err)
	}
	return nil
}

// Discard deletes the dead letters with the given sequence numbers,
// through w. Missing or busy sequence numbers are errors as in Requeue,
// and then nothing is deleted.
func (q *Queue[T]) Discard(w tipkv.Writer, seqs ...int64) error {
	err := q.c.withDead(w, seqs, func(*link.Tx, [][]byte) error { return nil })
	if err != nil {
		return fmt.Errorf("queue %q: discard: %w", q.c.name, err)
	}
	return nil
}

// withDead reads the dead letters seqs in w's Tx, holding them against
// concurrent Requeue and Discard until the Tx ends, runs f, and deletes
// them.
func (c *core) withDead(w tipkv.Writer, seqs []int64, f func(*link.Tx, [][]byte) error) error {
	if len(seqs) == 0 {
		return nil
	}
	return link.Write(w, func(tx *link.Tx) error {
		if err := c.owns(tx); err != nil {
			return err
		}
		if err := c.claimDead(seqs); err != nil {
			return err
		}
		done := func() { c.releaseDead(seqs) }
		tx.OnCommit(func() {
			if c.sm == nil {
				c.m.dead.Add(-int64(len(seqs)))
			}
			done()
		})
		tx.OnAbort(done)
		vals := make([][]byte, len(seqs))
		for i, seq := range seqs {
			v, err := c.store.Get(c.k.dead(nil, seq))
			if errors.Is(err, engine.ErrNotFound) {
				return fmt.Errorf("dead letter %d: %w", seq, tipkv.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("dead letter %d: %w", seq, err)
			}
			if c.sm != nil {
				// Another process may move it too: only one of the two
				// commits (the other reads again and finds it gone).
				if err := tx.Batch.Require(engine.Equals(c.k.dead(nil, seq), v)); err != nil {
					return err
				}
			}
			vals[i] = v
		}
		if err := f(tx, vals); err != nil {
			return err
		}
		for _, seq := range seqs {
			if err := tx.Batch.Delete(c.k.dead(nil, seq)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (c *core) claimDead(seqs []int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return tipkv.ErrClosed
	}
	seen := make(map[int64]bool, len(seqs))
	for _, s := range seqs {
		if seen[s] {
			return fmt.Errorf("%w: dead letter %d given twice", tipkv.ErrInvalid, s)
		}
		seen[s] = true
		if c.deadBusy[s] {
			return fmt.Errorf("dead letter %d is being moved by another call: %w", s, tipkv.ErrConflict)
		}
	}
	for _, s := range seqs {
		c.deadBusy[s] = true
	}
	return nil
}

func (c *core) releaseDead(seqs []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range seqs {
		delete(c.deadBusy, s)
	}
}
