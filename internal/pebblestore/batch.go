package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tipkv/tipkv/engine"
)

// batch is an engine.Batch on a Pebble batch. Closed batches are recycled
// (Pebble recycles its own): a commit allocates none.
type batch struct {
	b     *pebble.Batch
	s     *Store
	conds []engine.Cond
	size  int   // bytes of conditions, counted against MaxBatchBytes
	err   error // a write over the limit: the batch is refused
	// entered is set while an Apply(sync) waits for durability.
	entered bool
}

var batchPool = sync.Pool{New: func() any { return new(batch) }}

func (s *Store) newBatch() *batch {
	b := batchPool.Get().(*batch)
	b.b, b.s = s.db.NewBatch(), s
	return b
}

// maxBatchBytes is MaxBatchBytes, a variable so that a test can lower it.
var maxBatchBytes = MaxBatchBytes

// entryOverhead bounds what Pebble adds to a batch per entry (kind, varint
// lengths, sequence header), for the size check.
const entryOverhead = 24

// room refuses a write that would take the batch over MaxBatchBytes. Pebble
// panics when a batch reaches 4 GiB; the store stops well before.
func (b *batch) room(n int) error {
	if b.err != nil {
		return b.err
	}
	if b.b.Len()+b.size+n+entryOverhead > maxBatchBytes {
		b.err = fmt.Errorf("%w: the write would take the batch over %d bytes (it holds %d); split the Update", engine.ErrInvalid, maxBatchBytes, b.b.Len()+b.size)
		return b.err
	}
	return nil
}

func (b *batch) Set(key, value []byte) error {
	if err := b.room(len(key) + len(value)); err != nil {
		return err
	}
	return b.b.Set(key, value, nil)
}

func (b *batch) Delete(key []byte) error {
	if err := b.room(len(key)); err != nil {
		return err
	}
	return b.b.Delete(key, nil)
}

func (b *batch) DeleteRange(lo, hi []byte) error {
	if err := b.room(len(lo) + len(hi)); err != nil {
		return err
	}
	return b.b.DeleteRange(lo, hi, nil)
}

func (b *batch) Require(c engine.Cond) error {
	if err := c.Check(); err != nil {
		if b.err == nil {
			b.err = err // the batch is refused as a whole
		}
		return err
	}
	if err := b.room(c.Size()); err != nil {
		return err
	}
	// Set, Delete and DeleteRange copy into Pebble's batch; a condition
	// is kept until Apply, so it is copied here.
	c.Key, c.End, c.Value = bytes.Clone(c.Key), bytes.Clone(c.End), bytes.Clone(c.Value)
	b.conds = append(b.conds, c)
	b.size += c.Size() + entryOverhead
	return nil
}

func (b *batch) Empty() bool { return b.b.Empty() }
func (b *batch) Len() int    { return int(b.b.Count()) }
func (b *batch) Size() int   { return b.b.Len() }

// Apply implements engine.Batch. A batch with conditions holds the
// store's commit lock exclusively from the check until its writes are
// visible; any other batch holds it shared, so it cannot slip between a
// check and the writes that depend on it. Neither holds it across the
// durability wait, so synced writers still share Pebble's group commit.
//
// Every commit runs it, so its defers are kept few enough (with its
// returns) for the compiler to open-code them: the locked work is in
// applyShared and applyChecked.
func (b *batch) Apply(sync bool) (err error) {
	if b.err != nil {
		return b.err
	}
	if err := b.s.enter(); err != nil {
		return err
	}
	keep := false
	defer func() {
		if !keep {
			b.s.exit()
		}
	}()
	if err := b.s.f.writable(); err != nil {
		return err
	}
	if len(b.conds) > 0 {
		err = b.applyChecked(sync)
	} else {
		err = b.applyShared(sync)
	}
	// After a synced apply, Wait exits the gate.
	keep = err == nil && sync
	b.entered = keep
	return err
}

// applyShared applies a batch without conditions, holding the commit lock
// shared.
func (b *batch) applyShared(sync bool) (err error) {
	b.s.commitMu.RLock()
	defer b.s.commitMu.RUnlock()
	defer b.s.f.recoverFatal(&err)
	return b.write(sync)
}

// applyChecked checks the batch's conditions and applies it, holding the
// commit lock exclusively.
func (b *batch) applyChecked(sync bool) (err error) {
	b.s.commitMu.Lock()
	defer b.s.commitMu.Unlock()
	if err := b.s.check(b.conds); err != nil {
		return err
	}
	defer b.s.f.recoverFatal(&err)
	return b.write(sync)
}

// write hands the batch to Pebble: synced, without waiting for the sync
// (Wait does), or not synced.
func (b *batch) write(sync bool) error {
	if sync {
		return b.s.f.wrap(b.s.db.ApplyNoSyncWait(b.b, pebble.Sync))
	}
	return b.s.f.wrap(b.s.db.Apply(b.b, pebble.NoSync))
}

func (b *batch) Wait() (err error) {
	if !b.entered {
		return nil
	}
	b.entered = false
	defer b.s.exit()
	defer b.s.f.recoverFatal(&err)
	return b.s.f.wrap(b.b.SyncWait())
}

// Close releases the batch, and the store if an Apply(true) was never
// waited for, so that Close of the store cannot hang on it. An Apply(true)
// not waited for is waited for first: Pebble's log writer still holds the
// batch until its sync is done, and recycling it earlier is a data race
// (the race detector found it). The batch must not be used after, not
// even closed again: it is recycled.
func (b *batch) Close() error {
	if b.entered {
		b.entered = false
		func() {
			defer b.s.f.recoverFatal(new(error))
			_ = b.b.SyncWait() // the apply's outcome is Wait's to report
		}()
		b.s.exit()
	}
	err := b.b.Close()
	conds := b.conds[:0]
	clear(b.conds) // the conditions' keys and values are the caller's
	if cap(conds) > 64 {
		conds = nil
	}
	*b = batch{conds: conds}
	batchPool.Put(b)
	return err
}

// check evaluates conditions against the store as it is now. The caller
// holds commitMu exclusively.
func (s *Store) check(conds []engine.Cond) error {
	for _, c := range conds {
		ok, err := s.holds(c)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", engine.ErrConditionFailed, describe(c))
		}
	}
	return nil
}

func (s *Store) holds(c engine.Cond) (bool, error) {
	if c.Kind == engine.RangeEmpty {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: c.Key, UpperBound: c.End})
		if err != nil {
			return false, s.f.wrap(err)
		}
		found := it.First()
		if err := it.Close(); err != nil {
			return false, s.f.wrap(err)
		}
		return !found, nil
	}
	v, closer, err := s.db.Get(c.Key)
	if errors.Is(err, pebble.ErrNotFound) {
		return c.Kind == engine.KeyAbsent, nil
	}
	if err != nil {
		return false, s.f.wrap(err)
	}
	defer closer.Close()
	switch c.Kind {
	case engine.KeyPresent:
		return true, nil
	case engine.KeyEquals:
		return string(v) == string(c.Value), nil
	}
	return false, nil // KeyAbsent
}

func describe(c engine.Cond) string {
	switch c.Kind {
	case engine.KeyAbsent:
		return fmt.Sprintf("key %x is present", c.Key)
	case engine.KeyPresent:
		return fmt.Sprintf("key %x is absent", c.Key)
	case engine.KeyEquals:
		return fmt.Sprintf("key %x does not hold the value read", c.Key)
	case engine.RangeEmpty:
		return fmt.Sprintf("range [%x, %x) is not empty", c.Key, c.End)
	}
	return "unknown condition"
}
