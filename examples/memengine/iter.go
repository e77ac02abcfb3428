package memengine

import (
	"bytes"
	"fmt"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// iter walks the keys of one view in [lo, hi), or within a prefix after
// SeekPrefixGE ([lo, limit), limit <= hi). stack is the path to the
// current node: the nodes above it whose left subtree holds it, then the
// node itself, on top; their keys ascend from the top down, so popping
// the top and pushing the leftmost path of its right subtree moves to the
// next key. Key and Value return the node's own bytes, which no one
// changes.
type iter struct {
	s      *Store // its Close stops the iterator
	v      *view
	lo, hi []byte
	limit  []byte // the end of the walk: hi, or the prefix's end
	stack  []*node
	closed bool
}

func newIter(s *Store, v *view, lo, hi []byte) (*iter, error) {
	if len(lo) == 0 || hi == nil {
		return nil, fmt.Errorf("memengine: %w: an iterator needs both bounds, got [%x, %x)", engine.ErrInvalid, lo, hi)
	}
	lo, hi = bytes.Clone(lo), bytes.Clone(hi)
	return &iter{s: s, v: v, lo: lo, hi: hi, limit: hi}, nil
}

// seek moves to the first key >= key within the walk's bounds and
// reports whether there is one. Every positioning call ends in seek or
// settle: once the Store is closed, the iterator stops there.
func (it *iter) seek(key []byte) bool {
	if bytes.Compare(key, it.lo) < 0 {
		key = it.lo
	}
	it.stack = it.stack[:0]
	for n := it.v.root; n != nil; {
		if bytes.Compare(n.key, key) >= 0 {
			it.stack = append(it.stack, n)
			n = n.left
		} else {
			n = n.right
		}
	}
	return it.settle()
}

// settle ends the walk if the top of the stack is past its end, or if
// the iterator or its Store is closed, and reports whether it is at a key.
func (it *iter) settle() bool {
	if it.closed || it.s.closed.Load() ||
		(len(it.stack) > 0 && bytes.Compare(it.stack[len(it.stack)-1].key, it.limit) >= 0) {
		it.stack = it.stack[:0]
	}
	return len(it.stack) > 0
}

func (it *iter) SeekGE(key []byte) bool {
	it.limit = it.hi
	return it.seek(key)
}

// SeekPrefixGE moves to the first key >= key with key's prefix
// (codec.Split) and bounds the walk to that prefix until the next seek.
func (it *iter) SeekPrefixGE(key []byte) bool {
	it.limit = it.hi
	if pe := codec.PrefixEnd(key[:codec.Split(key)]); pe != nil && bytes.Compare(pe, it.hi) < 0 {
		it.limit = pe
	}
	return it.seek(key)
}

func (it *iter) First() bool {
	it.limit = it.hi
	return it.seek(it.lo)
}

func (it *iter) Last() bool {
	it.limit = it.hi
	n := it.v.floorBelow(it.hi)
	if n == nil || bytes.Compare(n.key, it.lo) < 0 {
		it.stack = it.stack[:0]
		return it.settle()
	}
	return it.seek(n.key)
}

func (it *iter) Next() bool {
	if !it.Valid() {
		return false
	}
	top := it.stack[len(it.stack)-1]
	it.stack = it.stack[:len(it.stack)-1]
	for n := top.right; n != nil; n = n.left {
		it.stack = append(it.stack, n)
	}
	return it.settle()
}

// NextPrefix moves to the first key whose prefix (codec.Split) is greater
// than the current key's.
func (it *iter) NextPrefix() bool {
	if !it.Valid() {
		return false
	}
	k := it.Key()
	pe := codec.PrefixEnd(k[:codec.Split(k)])
	if pe == nil { // a prefix of 0xFF bytes: nothing after it
		it.stack = it.stack[:0]
		return it.settle()
	}
	return it.seek(pe)
}

func (it *iter) Valid() bool {
	return len(it.stack) > 0 && !it.closed && !it.s.closed.Load()
}

func (it *iter) Key() []byte { return it.stack[len(it.stack)-1].key }

func (it *iter) Value() ([]byte, error) {
	if !it.Valid() {
		if err := it.Error(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("memengine: %w: Value of an iterator at no key", engine.ErrInvalid)
	}
	return it.stack[len(it.stack)-1].value, nil
}

// Error returns engine.ErrClosed once the Store closed under the
// iterator; nothing else stops it.
func (it *iter) Error() error {
	if !it.closed && it.s.closed.Load() {
		return engine.ErrClosed
	}
	return nil
}

// Close returns nil: the only error an iterator meets, ErrClosed, means
// its Store already closed it.
func (it *iter) Close() error {
	it.closed = true
	it.stack = nil
	return nil
}
