package sqlkv_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/sqlkv"
)

// sent records what a pool sends: one entry per round trip (a statement
// alone, or a pipeline), each the list of its statements with their
// arguments.
type sent struct {
	mu   sync.Mutex
	trip [][]stmtSent
}

type stmtSent struct {
	sql  string
	args []any
}

func (s *sent) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trip = append(s.trip, []stmtSent{{d.SQL, d.Args}})
	return ctx
}

func (s *sent) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sent) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var trip []stmtSent
	for _, q := range d.Batch.QueuedQueries {
		trip = append(trip, stmtSent{q.SQL, q.Arguments})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trip = append(s.trip, trip)
	return ctx
}

func (s *sent) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *sent) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// take returns the round trips recorded since the last take.
func (s *sent) take() [][]stmtSent {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trip
	s.trip = nil
	return t
}

// tracedStore opens a store on a new table through a pool of its own
// that records what it sends (the listening connection of watches is not
// recorded).
func tracedStore(t testing.TB, cfg sqlkv.Config) (*sqlkv.Store, *sent) {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	tr := &sent{}
	pc.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool = pool
	s := openStore(t, cfg)
	tr.take()
	return s, tr
}

// hasSQL reports whether a statement of the trip contains sub.
func hasSQL(trip []stmtSent, sub string) bool {
	for _, st := range trip {
		if strings.Contains(st.sql, sub) {
			return true
		}
	}
	return false
}
