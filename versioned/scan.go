package versioned

import (
	"math"
	"sync"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/storage"
)

// wrapIter, when set (by tests only), wraps every iterator this package
// opens, to count its seeks.
var wrapIter func(storage.Iter) storage.Iter

// traceDeleteRange, when set (by tests only), sees every range delete this
// package writes.
var traceDeleteRange func(lo, hi []byte)

func deleteRange(tx *storage.Tx, lo, hi []byte) error {
	if traceDeleteRange != nil {
		traceDeleteRange(lo, hi)
	}
	return tx.Batch.DeleteRange(lo, hi)
}

func newIter(s storage.Store, lo, hi []byte) (storage.Iter, error) {
	it, err := s.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	if wrapIter != nil {
		it = wrapIter(it)
	}
	return it, nil
}

// keyBufs recycles key buffers of the point reads (Latest, AsOf), which
// hold them only until their iterator is closed.
var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// numberKey returns prefix | desc(n) in a new slice.
func numberKey(prefix []byte, n int64) []byte {
	k := make([]byte, 0, len(prefix)+codec.NumberSize)
	return codec.AppendDesc(append(k, prefix...), n)
}

// newestNumber returns the newest version or position under prefix, 0 if
// there is none: one prefix seek, answered by the bloom filters when the
// prefix has no keys.
func newestNumber(s storage.Store, prefix []byte) (int64, error) {
	hi := numberKey(prefix, 0)
	it, err := newIter(s, prefix, hi)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.SeekPrefixGE(prefix) {
		return 0, it.Error()
	}
	return numberOf(it.Key(), len(prefix))
}

// oldestNumber returns the oldest version or position under prefix, 0 if
// there is none. It is the one reverse seek of this package: it finds where
// a range delete must end, never what a read returns.
func oldestNumber(s storage.Store, prefix []byte) (int64, error) {
	hi := numberKey(prefix, 0)
	it, err := newIter(s, prefix, hi)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	return numberOf(it.Key(), len(prefix))
}

// span is the part of a newest-first range a read visits: numbers in
// [bottom, top], newest first.
type span struct {
	top, bottom int64
}

// spanOf turns a query's bounds and cursor (already parsed: after is 0 when
// there is none) into a span, ok false when it is empty.
func spanOf(q tipkv.Query, after int64) (sp span, ok bool) {
	sp = span{top: math.MaxInt64, bottom: 1}
	if q.To > 0 {
		sp.top = q.To
	}
	if after > 0 {
		sp.top = min(sp.top, after-1)
	}
	if q.From > 1 {
		sp.bottom = q.From
	}
	return sp, sp.top >= sp.bottom
}

// scanNewest calls fn for each key under prefix in the span, newest first,
// with the number and, when values is set, the value (valid during the call
// only), at most limit times (0: no limit), until fn returns false or an
// error. It is one prefix seek (bloom filters) followed by a forward scan,
// bounded on both sides.
func scanNewest(s storage.Store, prefix []byte, sp span, limit int, values bool, fn func(n int64, value []byte) (bool, error)) (err error) {
	buf := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(buf)
	b := append((*buf)[:0], prefix...)
	b = codec.AppendDesc(b, sp.top)
	b = append(b, prefix...)
	b = codec.AppendDesc(b, sp.bottom-1)
	*buf = b
	n := len(prefix) + codec.NumberSize
	lo, hi := b[:n:n], b[n:]
	it, err := newIter(s, lo, hi)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	count := 0
	for ok := it.SeekPrefixGE(lo); ok; ok = it.Next() {
		num, err := numberOf(it.Key(), len(prefix))
		if err != nil {
			return err
		}
		var v []byte
		if values {
			if v, err = it.Value(); err != nil {
				return err
			}
		}
		more, err := fn(num, v)
		if err != nil || !more {
			return err
		}
		if count++; limit > 0 && count >= limit {
			return nil
		}
	}
	return it.Error()
}
