package memengine

import (
	"bytes"
	"hash/maphash"

	"github.com/tipkv/tipkv/engine"
)

// view is the key space as of one commit: a persistent treap, a binary
// search tree in key order (bytes.Compare) that is also a heap on each
// node's priority, which keeps it balanced in expectation. No node
// changes once published: a write copies the nodes on its path (O(log n)
// of them) and returns a new root, so a snapshot or an iterator is the
// root it started on, and the next commit leaves it alone.
type view struct {
	root *node
}

type node struct {
	key, value  []byte
	prio        uint64 // maphash of the key: the tree's shape is a function of its keys
	left, right *node
}

// find returns the node at key, or nil.
func (v *view) find(key []byte) *node {
	for n := v.root; n != nil; {
		switch c := bytes.Compare(key, n.key); {
		case c == 0:
			return n
		case c < 0:
			n = n.left
		default:
			n = n.right
		}
	}
	return nil
}

// ceil returns the node with the smallest key >= key, or nil.
func (v *view) ceil(key []byte) *node {
	var best *node
	for n := v.root; n != nil; {
		if bytes.Compare(n.key, key) >= 0 {
			best, n = n, n.left
		} else {
			n = n.right
		}
	}
	return best
}

// floorBelow returns the node with the largest key < key, or nil.
func (v *view) floorBelow(key []byte) *node {
	var best *node
	for n := v.root; n != nil; {
		if bytes.Compare(n.key, key) < 0 {
			best, n = n, n.right
		} else {
			n = n.left
		}
	}
	return best
}

// getAppend appends the value at key to dst, or returns
// engine.ErrNotFound with dst unchanged.
func (v *view) getAppend(dst, key []byte) ([]byte, error) {
	n := v.find(key)
	if n == nil {
		return dst, engine.ErrNotFound
	}
	return append(dst, n.value...), nil
}

// holds reports whether the condition c holds on v.
func (v *view) holds(c engine.Cond) bool {
	switch c.Kind {
	case engine.KeyAbsent:
		return v.find(c.Key) == nil
	case engine.KeyPresent:
		return v.find(c.Key) != nil
	case engine.KeyEquals:
		n := v.find(c.Key)
		return n != nil && bytes.Equal(n.value, c.Value)
	case engine.RangeEmpty:
		n := v.ceil(c.Key)
		return n == nil || bytes.Compare(n.key, c.End) >= 0
	}
	return false // Batch.Require refused every other kind
}

// apply returns the view after ops, applied in order; v is left as it
// is.
func (v *view) apply(ops []op, seed maphash.Seed) *view {
	root := v.root
	for _, o := range ops {
		switch o.kind {
		case opSet:
			if n := (&view{root}).find(o.key); n != nil {
				root = replace(root, o.key, o.value)
			} else {
				root = insert(root, &node{key: o.key, value: o.value, prio: maphash.Bytes(seed, o.key)})
			}
		case opDelete:
			root = remove(root, o.key)
		case opDeleteRange:
			l, r := split(root, o.key)
			_, r = split(r, o.end)
			root = merge(l, r)
		}
	}
	return &view{root: root}
}

// The treap's operations. Each returns a new root and copies the nodes it
// changes, never changing a node of its argument.

// split returns the nodes of n with keys < key and those with keys >= key.
func split(n *node, key []byte) (lt, ge *node) {
	if n == nil {
		return nil, nil
	}
	c := *n
	if bytes.Compare(n.key, key) < 0 {
		c.right, ge = split(n.right, key)
		return &c, ge
	}
	lt, c.left = split(n.left, key)
	return lt, &c
}

// merge joins a and b, every key of a below every key of b.
func merge(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		c := *a
		c.right = merge(a.right, b)
		return &c
	}
	c := *b
	c.left = merge(a, b.left)
	return &c
}

// insert adds x, whose key n does not hold.
func insert(n, x *node) *node {
	if n == nil {
		return x
	}
	if x.prio > n.prio {
		x.left, x.right = split(n, x.key)
		return x
	}
	c := *n
	if bytes.Compare(x.key, n.key) < 0 {
		c.left = insert(n.left, x)
	} else {
		c.right = insert(n.right, x)
	}
	return &c
}

// replace sets the value of key, which n holds.
func replace(n *node, key, value []byte) *node {
	c := *n
	switch cmp := bytes.Compare(key, n.key); {
	case cmp == 0:
		c.value = value
	case cmp < 0:
		c.left = replace(n.left, key, value)
	default:
		c.right = replace(n.right, key, value)
	}
	return &c
}

// remove deletes key from n, if n holds it.
func remove(n *node, key []byte) *node {
	if n == nil {
		return nil
	}
	c := *n
	switch cmp := bytes.Compare(key, n.key); {
	case cmp == 0:
		return merge(n.left, n.right)
	case cmp < 0:
		if c.left = remove(n.left, key); c.left == n.left {
			return n // not found: nothing copied
		}
	default:
		if c.right = remove(n.right, key); c.right == n.right {
			return n
		}
	}
	return &c
}
