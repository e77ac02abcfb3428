package sqlkv

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// Page sizes: the first page is small (a newest-first read wants one row),
// later ones grow fourfold to maxPage, so a long range costs few round
// trips and a short one reads little. A reader that says how many keys it
// expects (engine.NewIterN) gets that many in its first page, up to
// maxPage: a point read (n = 1) is one statement with LIMIT 1.
const (
	firstPage = 8
	maxPage   = 1024
)

// iter is an engine.Iter over [lo, hi), paged with tight bounds:
//
//	SELECT k, v FROM t WHERE k >= $from AND k < $upper ORDER BY k LIMIT n
//
// where upper is hi, or the end of the prefix after SeekPrefixGE. Every
// page of one iterator reads one view: the first page is sent together
// with BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY (one round trip),
// and the iterator holds that transaction's connection until Close. When
// the first page read from lo holds the whole range, the view is released
// at once and later seeks are answered from memory: a short read holds
// nothing. An iterator of a snapshot reads the snapshot's transaction.
type iter struct {
	s      *Store
	snap   *holder // the snapshot's view (not owned)
	own    *holder // this iterator's view, once begun
	lo, hi []byte
	first  int // the first page's size: firstPage, or the reader's hint

	full bool // all holds every row of [lo, hi): no view is needed
	all  []kv

	buf   []kv // the current page
	pos   int
	more  bool   // rows may follow buf below upper
	upper []byte // the bound of the current positioning
	limit int

	err    error
	closed bool
	pq     pageQuery
}

func newIter(s *Store, snap *holder, lo, hi []byte, n int) *iter {
	first := firstPage
	if n > 0 {
		first = min(n, maxPage)
	}
	return &iter{s: s, snap: snap, lo: bytes.Clone(lo), hi: bytes.Clone(hi), first: first}
}

// fetch runs a page query on the iterator's view.
func (it *iter) fetch(pq *pageQuery) error {
	if it.closed {
		return engine.ErrClosed
	}
	if it.s.closedFlag.Load() {
		it.drop()
		return engine.ErrClosed
	}
	if it.full {
		it.fromAll(pq)
		return nil
	}
	ctx := context.Background()
	run := func(c *pgxpool.Conn) error { return pq.run(ctx, it.s, c) }
	switch {
	case it.snap != nil:
		return it.snap.run(run)
	case it.own != nil:
		return it.own.run(run)
	}
	if err := it.s.enter(); err != nil {
		return err
	}
	defer it.s.exit()
	h, err := it.s.beginRead(ctx, pq)
	if err != nil {
		return err
	}
	if !pq.last && !pq.after && bytes.Equal(pq.from, it.lo) && bytes.Equal(pq.upper, it.hi) && len(pq.rows) < pq.limit {
		// The whole range is in hand: release the view now.
		it.full = true
		it.all = append([]kv(nil), pq.rows...)
		h.release()
		return nil
	}
	it.own = h
	return nil
}

// fromAll answers a page query from the rows of a range read whole.
func (it *iter) fromAll(pq *pageQuery) {
	pq.rows = pq.rows[:0]
	i := sort.Search(len(it.all), func(i int) bool {
		c := bytes.Compare(it.all[i].k, pq.from)
		return c > 0 || (c == 0 && !pq.after)
	})
	if pq.last {
		j := sort.Search(len(it.all), func(j int) bool { return bytes.Compare(it.all[j].k, pq.upper) >= 0 })
		if j > i {
			pq.rows = append(pq.rows, it.all[j-1])
		}
		return
	}
	for ; i < len(it.all) && len(pq.rows) < pq.limit && bytes.Compare(it.all[i].k, pq.upper) < 0; i++ {
		pq.rows = append(pq.rows, it.all[i])
	}
}

func (it *iter) fail(err error) bool {
	if isClosed(err) {
		it.err = engine.ErrClosed
	} else {
		it.err = fmt.Errorf("sqlkv: read [%x, %x): %w", it.lo, it.hi, err)
	}
	it.buf, it.pos, it.more = nil, 0, false
	return false
}

// seek positions at the first key >= from below upper (both clamped to
// the iterator's bounds).
func (it *iter) seek(from, upper []byte) bool {
	if it.err != nil {
		return false
	}
	if bytes.Compare(from, it.lo) < 0 {
		from = it.lo
	}
	if upper == nil || bytes.Compare(upper, it.hi) > 0 {
		upper = it.hi
	}
	it.buf, it.pos, it.more, it.upper = nil, 0, false, upper
	if bytes.Compare(from, upper) >= 0 {
		if it.closed || it.s.closedFlag.Load() {
			return it.fail(engine.ErrClosed)
		}
		return false
	}
	it.limit = it.first
	it.pq = pageQuery{from: from, upper: upper, limit: it.limit, rows: it.pq.rows}
	if err := it.fetch(&it.pq); err != nil {
		return it.fail(err)
	}
	it.buf = it.pq.rows
	it.more = len(it.buf) == it.limit
	return len(it.buf) > 0
}

func (it *iter) SeekGE(key []byte) bool { return it.seek(key, it.hi) }

func (it *iter) SeekPrefixGE(key []byte) bool {
	return it.seek(key, codec.PrefixEnd(key[:codec.Split(key)]))
}

func (it *iter) First() bool { return it.seek(it.lo, it.hi) }

func (it *iter) Last() bool {
	if it.err != nil {
		return false
	}
	it.buf, it.pos, it.more, it.upper = nil, 0, false, it.hi
	it.pq = pageQuery{from: it.lo, upper: it.hi, last: true, rows: it.pq.rows}
	if err := it.fetch(&it.pq); err != nil {
		return it.fail(err)
	}
	it.buf = it.pq.rows
	return len(it.buf) > 0
}

func (it *iter) Next() bool {
	if !it.Valid() {
		return false
	}
	if it.closed || it.s.closedFlag.Load() {
		it.drop()
		return it.fail(engine.ErrClosed)
	}
	it.pos++
	if it.pos < len(it.buf) {
		return true
	}
	if !it.more {
		it.buf, it.pos = nil, 0
		return false
	}
	it.limit = min(it.limit*4, maxPage)
	last := it.buf[len(it.buf)-1].k
	it.pq = pageQuery{from: last, after: true, upper: it.upper, limit: it.limit, rows: make([]kv, 0, it.limit)}
	if err := it.fetch(&it.pq); err != nil {
		return it.fail(err)
	}
	it.buf, it.pos = it.pq.rows, 0
	it.more = len(it.buf) == it.limit
	return len(it.buf) > 0
}

func (it *iter) NextPrefix() bool {
	if !it.Valid() {
		return false
	}
	k := it.Key()
	return it.seek(codec.ImmediateSuccessor(nil, k[:codec.Split(k)]), it.hi)
}

func (it *iter) Valid() bool { return it.err == nil && !it.closed && it.pos < len(it.buf) }

func (it *iter) Key() []byte {
	if !it.Valid() {
		return nil
	}
	return it.buf[it.pos].k
}

func (it *iter) Value() ([]byte, error) {
	if !it.Valid() {
		if it.err != nil {
			return nil, it.err
		}
		return nil, fmt.Errorf("%w: sqlkv: Value on an iterator not at a key", engine.ErrInvalid)
	}
	return it.buf[it.pos].v, nil
}

func (it *iter) Error() error { return it.err }

// drop releases the iterator's view.
func (it *iter) drop() {
	if it.own != nil {
		it.own.release()
		it.own = nil
	}
}

func (it *iter) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.drop()
	it.buf, it.all = nil, nil
	if isClosed(it.err) {
		return nil
	}
	return it.err
}
