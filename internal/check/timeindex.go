package check

import (
	"errors"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// The time index of a collection (family 0x0D, package versioned's
// timeindex.go):
//
//	0D | collection | id | desc(time)  ->  asc(version)
//	0D | collection | "" | desc(0)     ->  01 building, 02 on
//
// check requires the state key before any entry of its collection (it
// sorts first), every entry to name a stored version with that commit
// time, and, for an index that is on, every version with a commit time to
// have its entry. An index still building may miss entries.

// timeIndex checks one key of family 0x0D.
func (ck *checker) timeIndex(k []byte, coll string, rest, v []byte) {
	id, tail, err := codec.DecodeString(rest)
	if err != nil {
		ck.add("key", k, "bad id segment: %v", err)
		return
	}
	if coll == "" {
		ck.add("key", k, "empty collection name")
	}
	if len(tail) != codec.NumberSize {
		ck.add("key", k, "a time needs %d bytes, the key has %d", codec.NumberSize, len(tail))
		return
	}
	t, _, _ := codec.DecodeDesc(tail)
	if id == "" {
		ck.indexColl, ck.indexOn = coll, false
		switch {
		case t != 0:
			ck.add("key", k, "a time index state key with the number %d, want 0", t)
		case len(v) != 1 || (v[0] != 1 && v[0] != 2):
			ck.add("value", k, "time index state %x, want 01 (building) or 02 (on)", v)
		case v[0] == 2:
			ck.indexOn = true
			ck.indexComplete(k, coll)
		}
		return
	}
	if coll != ck.indexColl {
		ck.add("index", k, "a time index entry of collection %q, which has no time index state", coll)
	}
	if t < 1 {
		ck.add("index", k, "time %d is below 1", t)
		return
	}
	if len(v) != codec.NumberSize {
		ck.add("value", k, "a time index entry of %d bytes, want %d", len(v), codec.NumberSize)
		return
	}
	ver, _, _ := codec.DecodeAsc(v)
	vk := codec.AppendDesc(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll), id), ver)
	raw, err := ck.r.Get(vk)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		ck.add("index", k, "time index entry of version %d of %q, which is not stored", ver, id)
	case err != nil:
		ck.add("index", k, "reading version %d of %q: %v", ver, id, err)
	default:
		if vt := ck.fm.Parse(raw).Time; vt != t {
			ck.add("index", k, "time index entry at %d of version %d of %q, whose time is %d", t, ver, id, vt)
		}
	}
}

// indexComplete checks that every version with a commit time of the
// collection coll, whose index is on (its state key is k), has its entry.
func (ck *checker) indexComplete(k []byte, coll string) {
	p := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll)
	it, err := ck.r.NewIter(p, codec.PrefixEnd(p))
	if err != nil {
		ck.add("index", k, "reading the versions of %q: %v", coll, err)
		return
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		vk := it.Key()
		if len(vk) < 1+codec.NumberSize {
			continue // reported by the versions' check
		}
		raw, err := it.Value()
		if err != nil {
			ck.add("index", k, "reading %x: %v", vk, err)
			return
		}
		t := ck.fm.Parse(raw).Time
		if t == 0 {
			continue
		}
		ver, _, _ := codec.DecodeDesc(vk[len(vk)-codec.NumberSize:])
		ik := append([]byte(nil), vk[:len(vk)-codec.NumberSize]...)
		ik[0] = byte(codec.FamilyTimeIndex)
		ik = codec.AppendDesc(ik, t)
		got, err := ck.r.Get(ik)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			ck.add("index", vk, "version %d has no time index entry (the index of %q is on)", ver, coll)
		case err != nil:
			ck.add("index", vk, "reading its time index entry: %v", err)
		default:
			if n, _, _ := codec.DecodeAsc(got); len(got) != codec.NumberSize || n != ver {
				ck.add("index", vk, "its time index entry holds %x, want version %d", got, ver)
			}
		}
	}
	if err := it.Error(); err != nil {
		ck.add("index", k, "reading the versions of %q: %v", coll, err)
	}
}
