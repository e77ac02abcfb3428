package once

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

// SweepInterval is how often a DB that wrote a key sweeps in the
// background.
const SweepInterval = time.Minute

// sweepBatch is the most entries one sweep batch handles: each adds a
// Delete and a condition, within etcd's 128 operations a batch.
const sweepBatch = 48

// Stats counts what a sweep did.
type Stats struct {
	Windowed int // records of ended windows deleted
	Done     int // records of consumed queue messages deleted
	Entries  int // index entries walked (due and seq)
}

// sweeper is the per-DB state of the sweep.
type sweeper struct {
	mu      sync.Mutex // one sweep at a time per DB
	started bool
}

type sweeperKey struct{}

func sweeperOf(ln *link.DB) *sweeper {
	return ln.Services.Get(sweeperKey{}, func() any { return new(sweeper) }).(*sweeper)
}

// startSweeper starts the background sweep of ln, once: every
// SweepInterval until the DB closes.
func startSweeper(ln *link.DB) {
	s := sweeperOf(ln)
	s.mu.Lock()
	if s.started || ln.ReadOnly {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ln.Services.OnClose(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		t := time.NewTimer(SweepInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := Sweep(ctx, ln)
			switch {
			case ctx.Err() != nil, errors.Is(err, engine.ErrClosed):
				return
			case err != nil:
				ln.Logger.LogAttrs(ctx, slog.LevelWarn, "tipkv: idempotency key sweep failed", slog.Any("error", err))
			default:
				ln.Logger.LogAttrs(ctx, slog.LevelDebug, "tipkv: idempotency key sweep",
					slog.Int("windowed", st.Windowed), slog.Int("done", st.Done), slog.Int("entries", st.Entries))
			}
			t.Reset(SweepInterval)
		}
	}()
}

// Sweep deletes the records that no longer hold: those whose window ended
// by the DB's clock, and the until-done ones whose message was consumed
// (below its queue's head, and not a dead letter). It walks only index
// entries: the due entries of ended windows, each queue's seq entries
// below its first live message. Each batch deletes the walked span of
// the index with one range delete, and each record on the condition that
// it is as read, so a key written again meanwhile is kept. It stops
// between batches when ctx ends.
func Sweep(ctx context.Context, ln *link.DB) (Stats, error) {
	s := sweeperOf(ln)
	s.mu.Lock()
	defer s.mu.Unlock()
	var st Stats
	if err := sweepWindows(ctx, ln, &st); err != nil {
		return st, err
	}
	return st, sweepDone(ctx, ln, &st)
}

func batchSize(ln *link.DB) int {
	n := sweepBatch
	if m := ln.Caps.MaxBatchOps; m > 0 {
		n = min(n, max(1, (m-2)/2))
	}
	return n
}

// collect returns the keys and values of up to n entries in [lo, hi).
func collect(r engine.Reader, lo, hi []byte, n int) (keys, vals [][]byte, err error) {
	it, err := engine.NewIterN(r, lo, hi, n)
	if err != nil {
		return nil, nil, err
	}
	for ok := it.First(); ok && len(keys) < n; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return nil, nil, err
		}
		keys = append(keys, append([]byte(nil), it.Key()...))
		vals = append(vals, append([]byte(nil), v...))
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return keys, vals, err
}

func sweepWindows(ctx context.Context, ln *link.DB, st *Stats) error {
	lo := codec.AppendFamily(nil, codec.FamilyOnceDue)
	n := batchSize(ln)
	for ctx.Err() == nil {
		// Every key due by now has ended (a key holds while now < due).
		hi := dueBound(nil, ln.Clock().UnixNano()+1)
		keys, _, err := collect(ln.Store, lo, hi, n)
		if err != nil || len(keys) == 0 {
			return err
		}
		var swept int
		err = ln.Update(func(tx *link.Tx) error {
			swept = 0
			for _, k := range keys {
				due, space, name, key, err := ParseDueKey(k)
				if err != nil {
					continue // not one of ours: the range delete drops it
				}
				rk := RecordKey(nil, space, name, key)
				raw, err := tx.DB.Store.Get(rk)
				if errors.Is(err, engine.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				rec, err := Parse(raw)
				if err != nil || rec.Kind != Window || rec.Due != due {
					continue // written again (its own entry is elsewhere), or corrupt: check reports it
				}
				if err := tx.Batch.Require(engine.Equals(rk, raw)); err != nil {
					return err
				}
				if err := tx.Batch.Delete(rk); err != nil {
					return err
				}
				swept++
			}
			last := keys[len(keys)-1]
			return tx.Batch.DeleteRange(keys[0], codec.ImmediateSuccessor(nil, last))
		})
		if err != nil {
			return err
		}
		st.Windowed += swept
		st.Entries += len(keys)
		lo = codec.ImmediateSuccessor(nil, keys[len(keys)-1])
	}
	return ctx.Err()
}

func sweepDone(ctx context.Context, ln *link.DB, st *Stats) error {
	lo, end := codec.AppendFamily(nil, codec.FamilyOnceSeqs), codec.AppendFamily(nil, codec.FamilyOnceSeqs+1)
	for ctx.Err() == nil {
		keys, _, err := collect(ln.Store, lo, end, 1)
		if err != nil || len(keys) == 0 {
			return err
		}
		queue, _, err := codec.DecodeString(keys[0][1:])
		if err != nil {
			return err
		}
		prefix := seqPrefix(nil, queue)
		if err := sweepQueue(ctx, ln, queue, prefix, st); err != nil {
			return err
		}
		lo = codec.PrefixEnd(prefix)
	}
	return ctx.Err()
}

// firstLive returns the sequence number of queue's first item, at or
// after the head its state key stores (every message below it is
// consumed), or MaxInt64 when it has none. Seeking from the stored head
// never walks the consumed messages' tombstones.
func firstLive(r engine.Reader, queue string) (int64, error) {
	head := int64(1)
	sk := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), queue)
	v, err := r.Get(sk)
	switch {
	case err == nil:
		s, err := queuefmt.ParseState(v)
		if err != nil {
			return 0, err
		}
		head = max(head, s.Head)
	case !errors.Is(err, engine.ErrNotFound):
		return 0, err
	}
	ip := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), queue)
	keys, _, err := collect(r, codec.AppendAsc(append([]byte(nil), ip...), head), codec.PrefixEnd(ip), 1)
	if err != nil || len(keys) == 0 {
		return math.MaxInt64, err
	}
	seq, _, err := codec.DecodeAsc(keys[0][len(ip):])
	return seq, err
}

func sweepQueue(ctx context.Context, ln *link.DB, queue string, prefix []byte, st *Stats) error {
	bound, err := firstLive(ln.Store, queue)
	if err != nil {
		return err
	}
	lo, hi := prefix, codec.PrefixEnd(prefix)
	if bound < math.MaxInt64 {
		hi = SeqKey(nil, queue, bound)
	}
	n := batchSize(ln)
	for ctx.Err() == nil {
		keys, vals, err := collect(ln.Store, lo, hi, n)
		if err != nil || len(keys) == 0 {
			return err
		}
		var swept int
		err = ln.Update(func(tx *link.Tx) error {
			swept = 0
			var kept [][2][]byte
			for i, k := range keys {
				seq, _, err := codec.DecodeAsc(k[len(prefix):])
				if err != nil {
					continue
				}
				rk := RecordKey(nil, SpaceQueue, queue, string(vals[i]))
				raw, err := tx.DB.Store.Get(rk)
				if errors.Is(err, engine.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				rec, err := Parse(raw)
				if err != nil || rec.Kind != UntilDone || rec.Result != seq {
					continue
				}
				lives, err := messageLives(tx.DB.Store, queue, seq)
				if err != nil {
					return err
				}
				if lives {
					kept = append(kept, [2][]byte{k, vals[i]})
					continue
				}
				if err := tx.Batch.Require(engine.Equals(rk, raw)); err != nil {
					return err
				}
				if err := tx.Batch.Delete(rk); err != nil {
					return err
				}
				swept++
			}
			if len(kept) == len(keys) {
				return nil // dead letters only: nothing to delete
			}
			if err := tx.Batch.DeleteRange(keys[0], codec.ImmediateSuccessor(nil, keys[len(keys)-1])); err != nil {
				return err
			}
			for _, kv := range kept {
				if err := tx.Batch.Set(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		st.Done += swept
		st.Entries += len(keys)
		lo = codec.ImmediateSuccessor(nil, keys[len(keys)-1])
	}
	return ctx.Err()
}
