package memengine

import (
	"bytes"
	"fmt"

	"github.com/tipkv/tipkv/engine"
)

// batch collects writes and conditions, copied as they come, and applies
// them in one commit of the Memory.
type batch struct {
	s      *Store
	ops    []op
	conds  []engine.Cond
	size   int   // bytes of keys, values and conditions
	err    error // the first bad input: Apply fails with it
	closed bool
}

// op is one write of a batch.
type op struct {
	kind       opKind
	key, value []byte
	end        []byte // opDeleteRange: [key, end)
}

type opKind uint8

const (
	opSet opKind = iota + 1
	opDelete
	opDeleteRange
)

func (b *batch) add(o op) error {
	if b.closed {
		return engine.ErrClosed
	}
	b.ops = append(b.ops, o)
	b.size += len(o.key) + len(o.value) + len(o.end)
	return nil
}

func (b *batch) Set(key, value []byte) error {
	return b.add(op{kind: opSet, key: bytes.Clone(key), value: append([]byte{}, value...)})
}

func (b *batch) Delete(key []byte) error {
	return b.add(op{kind: opDelete, key: bytes.Clone(key)})
}

func (b *batch) DeleteRange(lo, hi []byte) error {
	return b.add(op{kind: opDeleteRange, key: bytes.Clone(lo), end: bytes.Clone(hi)})
}

// Require adds c, copied. A condition no engine can evaluate is
// engine.ErrInvalid, now and at Apply.
func (b *batch) Require(c engine.Cond) error {
	if b.closed {
		return engine.ErrClosed
	}
	if err := c.Check(); err != nil {
		if b.err == nil {
			b.err = err
		}
		return err
	}
	b.size += c.Size()
	b.conds = append(b.conds, engine.Cond{Kind: c.Kind, Key: bytes.Clone(c.Key), End: bytes.Clone(c.End), Value: bytes.Clone(c.Value)})
	return nil
}

func (b *batch) Empty() bool { return len(b.ops) == 0 }
func (b *batch) Len() int    { return len(b.ops) }
func (b *batch) Size() int   { return b.size }

// Apply checks the conditions and applies the writes in one commit: no
// other batch on the Memory, from any Store, commits in between. The
// writes are visible when it returns; sync changes nothing in memory.
func (b *batch) Apply(sync bool) error {
	switch {
	case b.closed || b.s.closed.Load():
		return engine.ErrClosed
	case b.err != nil:
		return fmt.Errorf("memengine: apply: %w", b.err)
	}
	m := b.s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.s.closed.Load() { // closed while this waited
		return engine.ErrClosed
	}
	cur := m.cur.Load()
	for _, c := range b.conds {
		if !cur.holds(c) {
			return engine.ErrConditionFailed
		}
	}
	if len(b.ops) == 0 {
		return nil // a guard: conditions only
	}
	m.cur.Store(cur.apply(b.ops, m.seed))
	m.notify(b.ops)
	return nil
}

// Wait returns at once: a commit in memory is as durable as it gets when
// Apply returns.
func (b *batch) Wait() error { return nil }

func (b *batch) Close() error {
	b.closed = true
	b.ops, b.conds = nil, nil
	return nil
}
