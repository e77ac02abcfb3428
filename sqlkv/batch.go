package sqlkv

import (
	"bytes"
	"fmt"

	"github.com/tipkv/tipkv/engine"
)

type opKind uint8

const (
	opSet opKind = iota + 1
	opDelete
	opDeleteRange
)

// op is one write, in the order it was added.
type op struct {
	kind opKind
	k, v []byte // v: Set only
	end  []byte // DeleteRange only
}

// batch is an engine.Batch. It buffers writes and conditions, copies of
// the caller's bytes, and sends them at Apply as one transaction in one
// round trip (see plan).
type batch struct {
	s      *Store
	ops    []op
	conds  []engine.Cond
	size   int
	err    error // a write or condition was refused: the whole batch is
	closed bool
	held   [][]byte // the writer's prefix locks (Hold); nil: not told
}

// room refuses an addition that would take the batch over its limits.
func (b *batch) room(n int, cond bool) error {
	if b.err != nil {
		return b.err
	}
	c := b.s.cfg
	switch {
	case cond && len(b.conds)+1 > c.MaxBatchOps:
		b.err = fmt.Errorf("%w: sqlkv: more than %d conditions in one batch; split the Update", engine.ErrInvalid, c.MaxBatchOps)
	case !cond && len(b.ops)+1 > c.MaxBatchOps:
		b.err = fmt.Errorf("%w: sqlkv: more than %d writes in one batch; split the Update", engine.ErrInvalid, c.MaxBatchOps)
	case b.size+n > c.MaxBatchBytes:
		b.err = fmt.Errorf("%w: sqlkv: the batch would hold more than %d bytes; split the Update", engine.ErrInvalid, c.MaxBatchBytes)
	}
	return b.err
}

func (b *batch) Set(key, value []byte) error {
	if len(value) > b.s.cfg.MaxValueSize && b.err == nil {
		b.err = fmt.Errorf("%w: sqlkv: a value of %d bytes at key %x is over the limit of %d", engine.ErrInvalid, len(value), key, b.s.cfg.MaxValueSize)
	}
	if err := b.room(len(key)+len(value), false); err != nil {
		return err
	}
	b.ops = append(b.ops, op{kind: opSet, k: bytes.Clone(key), v: append(make([]byte, 0, len(value)), value...)})
	b.size += len(key) + len(value)
	return nil
}

func (b *batch) Delete(key []byte) error {
	if err := b.room(len(key), false); err != nil {
		return err
	}
	b.ops = append(b.ops, op{kind: opDelete, k: bytes.Clone(key)})
	b.size += len(key)
	return nil
}

func (b *batch) DeleteRange(lo, hi []byte) error {
	if err := b.room(len(lo)+len(hi), false); err != nil {
		return err
	}
	b.ops = append(b.ops, op{kind: opDeleteRange, k: bytes.Clone(lo), end: bytes.Clone(hi)})
	b.size += len(lo) + len(hi)
	return nil
}

func (b *batch) Require(c engine.Cond) error {
	if err := c.Check(); err != nil {
		if b.err == nil {
			b.err = err
		}
		return err
	}
	if err := b.room(c.Size(), true); err != nil {
		return err
	}
	b.conds = append(b.conds, engine.Cond{Kind: c.Kind, Key: bytes.Clone(c.Key), End: bytes.Clone(c.End), Value: bytes.Clone(c.Value)})
	b.size += c.Size()
	return nil
}

func (b *batch) Empty() bool { return len(b.ops) == 0 }
func (b *batch) Len() int    { return len(b.ops) }
func (b *batch) Size() int   { return b.size }

// Apply implements engine.Batch. Every commit is durable when it
// returns (PostgreSQL's synchronous_commit decides how), so sync changes
// nothing and Wait returns at once.
func (b *batch) Apply(bool) error {
	if b.err != nil {
		return b.err
	}
	if b.closed {
		return fmt.Errorf("%w: sqlkv: Apply on a closed batch", engine.ErrInvalid)
	}
	if err := b.s.enter(); err != nil {
		return err
	}
	defer b.s.exit()
	if len(b.ops) == 0 && len(b.conds) == 0 {
		return nil
	}
	return b.s.apply(b.s.plan(b.ops, b.conds, b.held))
}

func (b *batch) Wait() error { return nil }

// Hold implements engine.LockHolding: Apply gives way (fails the
// condition) when a condition's key is under a prefix whose writer lock
// (Lock) another caller holds or waits for and the batch's writer does not
// hold. See plan's giveWay.
func (b *batch) Hold(prefixes [][]byte) {
	b.held = append(make([][]byte, 0, len(prefixes)), prefixes...)
}

func (b *batch) Close() error {
	b.closed = true
	b.ops, b.conds, b.held = nil, nil, nil
	return nil
}
