package etcdkv

import (
	"bytes"
	"slices"
	"sort"
)

// opKind is the kind of a write in a batch.
type opKind uint8

const (
	opSet opKind = iota + 1
	opDelete
	opDeleteRange
)

// op is one write of a batch, in the store's key space (no namespace).
type op struct {
	kind  opKind
	key   []byte
	end   []byte // opDeleteRange: the exclusive end
	value []byte // opSet
}

// normalize folds a batch's writes, taken in order, into an equivalent set
// of writes that one etcd txn accepts. etcd applies the ops of a txn in
// order but refuses, before applying anything, a key put twice, a put and a
// delete of one key, and a put inside a range deleted by the same txn; it
// accepts double deletes and overlapping ranges. So:
//
//   - the last Set of a key wins, and a delete after a Set removes the Set;
//   - every delete, point or range, joins one union of deleted intervals,
//     where a range covering another swallows it and adjacent or
//     overlapping ranges merge;
//   - a Set that survives inside a deleted interval splits it: [lo, hi)
//     with a Set of k becomes [lo, k) and [k+"\x00", hi);
//   - an interval holding a single key becomes a point delete.
//
// Applying the result in any order leaves the store as applying ops in
// order would. The result is sorted (deletes by start, then puts by key),
// so equal batches make equal txns. A range with lo >= hi deletes nothing
// and is dropped, as Pebble ignores it.
func normalize(ops []op) []op {
	if !slices.ContainsFunc(ops, func(o op) bool { return o.kind != opSet }) {
		return normalizeSets(ops)
	}
	puts := map[string][]byte{}
	var dels []span // disjoint, sorted by lo, not adjacent
	for _, o := range ops {
		switch o.kind {
		case opSet:
			puts[string(o.key)] = o.value
		case opDelete:
			delete(puts, string(o.key))
			dels = addSpan(dels, span{o.key, successor(o.key)})
		case opDeleteRange:
			if bytes.Compare(o.key, o.end) >= 0 {
				continue
			}
			for k := range puts {
				if k >= string(o.key) && k < string(o.end) {
					delete(puts, k)
				}
			}
			dels = addSpan(dels, span{o.key, o.end})
		}
	}
	keys := make([]string, 0, len(puts))
	for k := range puts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]op, 0, len(dels)+len(keys))
	// Walk the deleted spans and the sorted puts together, cutting each
	// span around the puts inside it.
	p := 0
	for _, d := range dels {
		lo := d.lo
		for p < len(keys) && keys[p] < string(d.lo) {
			p++
		}
		for p < len(keys) && keys[p] < string(d.hi) {
			k := []byte(keys[p])
			out = appendDelete(out, lo, k)
			lo = successor(k)
			p++
		}
		out = appendDelete(out, lo, d.hi)
	}
	for _, k := range keys {
		out = append(out, op{kind: opSet, key: []byte(k), value: puts[k]})
	}
	return out
}

// normalizeSets is normalize for a batch of Sets only (the common case: a
// queue's enqueue, a document's Put): the ops sorted by key, the last Set
// of each key kept. It keeps the batch's slices and converts nothing.
func normalizeSets(ops []op) []op {
	out := slices.Clone(ops)
	slices.SortStableFunc(out, func(a, b op) int { return bytes.Compare(a.key, b.key) })
	n := 0
	for i := range out {
		if i+1 < len(out) && bytes.Equal(out[i].key, out[i+1].key) {
			continue // a later Set of the key follows
		}
		out[n] = out[i]
		n++
	}
	return out[:n]
}

// appendDelete appends the delete of [lo, hi): nothing if it is empty, a
// point delete if it holds one key, a range delete otherwise.
func appendDelete(out []op, lo, hi []byte) []op {
	switch {
	case bytes.Compare(lo, hi) >= 0:
		return out
	case isSuccessor(lo, hi):
		return append(out, op{kind: opDelete, key: lo})
	default:
		return append(out, op{kind: opDeleteRange, key: lo, end: hi})
	}
}

// span is the interval [lo, hi).
type span struct{ lo, hi []byte }

// addSpan adds s to the sorted, disjoint, non-adjacent spans ds, merging
// what it overlaps or touches.
func addSpan(ds []span, s span) []span {
	// i: the first span that ends at or after s.lo (it may touch s).
	i := sort.Search(len(ds), func(i int) bool { return bytes.Compare(ds[i].hi, s.lo) >= 0 })
	// j: the first span that starts after s.hi (it cannot touch s).
	j := sort.Search(len(ds), func(j int) bool { return bytes.Compare(ds[j].lo, s.hi) > 0 })
	if i < j {
		if bytes.Compare(ds[i].lo, s.lo) < 0 {
			s.lo = ds[i].lo
		}
		if bytes.Compare(ds[j-1].hi, s.hi) > 0 {
			s.hi = ds[j-1].hi
		}
	}
	return slices.Replace(ds, i, j, s)
}

// successor is the smallest key after k: k + "\x00".
func successor(k []byte) []byte {
	return append(slices.Clip(bytes.Clone(k)), 0)
}

// isSuccessor reports whether hi is k's successor, so [lo, hi) holds lo only.
func isSuccessor(lo, hi []byte) bool {
	return len(hi) == len(lo)+1 && hi[len(lo)] == 0 && bytes.HasPrefix(hi, lo)
}
