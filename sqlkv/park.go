package sqlkv

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A read view ends with a COMMIT of its read-only transaction. Sent on its
// own, that is a second round trip for every iterator, and on a busy
// machine a second wake-up of the client too: it doubled the cost of a
// point read. So a released view's connection is parked, still inside its
// transaction, and the next read view that starts takes it and sends the
// COMMIT in front of its own BEGIN and first page, in the same pipeline.
// A connection parked for longer than parkFor is committed and returned to
// the pool in the background, so that an idle store holds no connection
// and no snapshot (an open snapshot holds back vacuum) for long.
//
// At most maxParked connections are parked (a quarter of the pool, at
// least one), so writers, which take connections from the pool only, never
// wait for parked ones for long.
const maxParked = 4

// parkFor is a variable for the tests only: each store copies it at Open.
var parkFor = 20 * time.Millisecond

type parkedConn struct {
	conn *pgxpool.Conn
	at   time.Time
}

// park keeps conn, inside a finished read-only transaction, for the next
// read view. It reports false when there is no room (or the store is
// closing): the caller ends the transaction itself.
func (s *Store) park(conn *pgxpool.Conn) bool {
	if conn.Conn().PgConn().TxStatus() != 'T' { // idle, or a failed transaction
		return false
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.pclosed || len(s.parked) >= s.maxParked {
		return false
	}
	s.parked = append(s.parked, parkedConn{conn: conn, at: time.Now()})
	if s.ptimer == nil {
		s.ptimer = time.AfterFunc(s.parkFor, s.sweep)
	}
	return true
}

// unpark returns the connection parked last, or nil.
func (s *Store) unpark() *pgxpool.Conn {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	n := len(s.parked)
	if n == 0 {
		return nil
	}
	c := s.parked[n-1].conn
	s.parked[n-1] = parkedConn{}
	s.parked = s.parked[:n-1]
	return c
}

// sweep commits the connections parked for parkFor or longer and returns
// them to the pool; it runs again while any stay parked.
func (s *Store) sweep() {
	s.pmu.Lock()
	s.ptimer = nil
	if s.pclosed {
		s.pmu.Unlock()
		return
	}
	now := time.Now()
	var old []*pgxpool.Conn
	keep := s.parked[:0]
	for _, p := range s.parked {
		if now.Sub(p.at) >= s.parkFor {
			old = append(old, p.conn)
		} else {
			keep = append(keep, p)
		}
	}
	clear(s.parked[len(keep):])
	s.parked = keep
	if len(keep) > 0 {
		s.ptimer = time.AfterFunc(s.parkFor-now.Sub(keep[0].at), s.sweep)
	}
	s.pmu.Unlock()
	for _, c := range old {
		s.endRead(c)
	}
}

// endRead commits a read-only transaction and returns its connection to
// the pool, in the background; Close waits for it.
func (s *Store) endRead(conn *pgxpool.Conn) {
	if s.enter() != nil { // closing: no background work
		conn.Conn().Close(context.Background())
		conn.Release()
		return
	}
	go func() {
		defer s.exit()
		if _, err := conn.Exec(context.Background(), "COMMIT"); err != nil {
			conn.Conn().Close(context.Background())
		}
		conn.Release()
	}()
}

// closeParked closes every parked connection, for Close: the server rolls
// their transactions back.
func (s *Store) closeParked() {
	s.pmu.Lock()
	s.pclosed = true
	if s.ptimer != nil {
		s.ptimer.Stop()
		s.ptimer = nil
	}
	ps := s.parked
	s.parked = nil
	s.pmu.Unlock()
	for _, p := range ps {
		p.conn.Conn().Close(context.Background())
		p.conn.Release()
	}
}
