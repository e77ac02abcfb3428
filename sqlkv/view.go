package sqlkv

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tipkv/tipkv/engine"
)

// holder is a pooled connection inside a REPEATABLE READ, read-only
// transaction: one consistent view, shared by a snapshot's reads or owned
// by one iterator. Store.Close kills every holder still open, so that an
// iterator left open (a loop that broke, an iter.Pull never stopped)
// never keeps the store from closing.
type holder struct {
	s    *Store
	mu   sync.Mutex // one statement at a time on the connection
	conn *pgxpool.Conn
	dead bool // released: calls report ErrClosed
}

const beginRead = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`

// beginRead begins a read-only REPEATABLE READ transaction on a
// connection: a parked one (see park.go), whose earlier view's COMMIT goes
// in front, or one from the pool. The snapshot is taken by the first
// statement, so first (a page query, or nil for a bare SELECT) is sent
// with BEGIN in one round trip; its rows are returned. A parked connection
// that fails is dropped and the view begun again on one from the pool: a
// read is safe to send twice.
func (s *Store) beginRead(ctx context.Context, first *pageQuery) (*holder, error) {
	conn := s.unpark()
	parked := conn != nil
	for {
		if conn == nil {
			var err error
			if conn, err = s.pool.Acquire(ctx); err != nil {
				return nil, fmt.Errorf("sqlkv: acquire a connection: %w", err)
			}
		}
		err := s.sendBegin(ctx, conn, parked, first)
		if err == nil {
			break
		}
		conn.Conn().Close(ctx) // the pool drops a closed connection
		conn.Release()
		if !parked {
			return nil, fmt.Errorf("sqlkv: begin a read view: %w", err)
		}
		conn, parked = nil, false
	}
	h := &holder{s: s, conn: conn}
	s.hmu.Lock()
	s.holders[h] = struct{}{}
	s.hmu.Unlock()
	return h, nil
}

func (s *Store) sendBegin(ctx context.Context, conn *pgxpool.Conn, commit bool, first *pageQuery) error {
	b := &pgx.Batch{}
	if commit {
		b.Queue("COMMIT")
	}
	b.Queue(beginRead)
	if first == nil {
		b.Queue(`SELECT 1`)
	} else {
		first.queue(s, b)
	}
	br := conn.SendBatch(ctx, b)
	var err error
	if commit {
		_, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		if first == nil {
			_, err = br.Exec()
		} else {
			err = first.read(br)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// run runs f on the held connection.
func (h *holder) run(f func(c *pgxpool.Conn) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead {
		return engine.ErrClosed
	}
	if err := h.s.enter(); err != nil {
		return err
	}
	defer h.s.exit()
	return f(h.conn)
}

// release ends the view: its connection is parked for the next view to
// commit (park.go), or committed and returned to the pool in the
// background. Either way the caller does not wait a round trip.
func (h *holder) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead {
		return
	}
	h.dead = true
	h.s.hmu.Lock()
	delete(h.s.holders, h)
	h.s.hmu.Unlock()
	conn := h.conn
	h.conn = nil
	if !h.s.park(conn) {
		h.s.endRead(conn)
	}
}

// kill ends the holder for Store.Close: it closes the connection (the
// server rolls the transaction back) and later calls report ErrClosed.
func (h *holder) kill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead {
		return
	}
	h.dead = true
	h.s.hmu.Lock()
	delete(h.s.holders, h)
	h.s.hmu.Unlock()
	h.conn.Conn().Close(context.Background())
	h.conn.Release()
	h.conn = nil
}

// kv is one row.
type kv struct{ k, v []byte }

// pageQuery reads up to limit rows of [from, upper) (or (from, upper)
// with after), ascending, or the last row of [from, upper) with last.
type pageQuery struct {
	from, upper []byte
	after, last bool
	limit       int
	rows        []kv
}

func (p *pageQuery) sql(s *Store) (string, []any) {
	switch {
	case p.last:
		return s.q.last, []any{p.from, p.upper}
	case p.after:
		return s.q.pageAfter, []any{p.from, p.upper, p.limit}
	}
	return s.q.pageFrom, []any{p.from, p.upper, p.limit}
}

func (p *pageQuery) queue(s *Store, b *pgx.Batch) {
	sql, args := p.sql(s)
	b.Queue(sql, args...)
}

func (p *pageQuery) read(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	return p.scan(rows)
}

func (p *pageQuery) scan(rows pgx.Rows) error {
	defer rows.Close()
	p.rows = p.rows[:0]
	for rows.Next() {
		var r kv
		if err := rows.Scan(&r.k, &r.v); err != nil {
			return err
		}
		if r.v == nil {
			r.v = []byte{}
		}
		p.rows = append(p.rows, r)
	}
	return rows.Err()
}

func (p *pageQuery) run(ctx context.Context, s *Store, c *pgxpool.Conn) error {
	sql, args := p.sql(s)
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	return p.scan(rows)
}

// snapshot is an engine.Snapshot on a holder.
type snapshot struct {
	s *Store
	h *holder
}

func (sn *snapshot) Get(key []byte) ([]byte, error) {
	var v []byte
	err := sn.h.run(func(c *pgxpool.Conn) error {
		var err error
		v, err = sn.s.get(context.Background(), c, key)
		return err
	})
	return v, err
}

func (sn *snapshot) NewIter(lo, hi []byte) (engine.Iter, error) { return sn.NewIterN(lo, hi, 0) }

func (sn *snapshot) NewIterN(lo, hi []byte, n int) (engine.Iter, error) {
	if len(lo) == 0 || hi == nil {
		return nil, fmt.Errorf("%w: sqlkv: unbounded iterator [%x, %x)", engine.ErrInvalid, lo, hi)
	}
	sn.h.mu.Lock()
	dead := sn.h.dead
	sn.h.mu.Unlock()
	if dead {
		return nil, engine.ErrClosed
	}
	return newIter(sn.s, sn.h, lo, hi, n), nil
}

func (sn *snapshot) Close() error {
	sn.h.release()
	return nil
}

// isClosed reports whether err means the store or view was closed.
func isClosed(err error) bool { return errors.Is(err, engine.ErrClosed) }
