package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
)

// tipkv's queue through sqlkv, on the riverpg section's server: a handle
// is a sqlkv.Open (a pool of sqlkv's default size, its own LISTEN
// connection), as a process would hold; the queue is a queue.Queue of raw
// bytes with no limit on deliveries, as bench's other queues.

// burnLease is the lease of every burn-down and latency delivery: far
// longer than a run, so nothing is delivered twice.
const burnLease = 5 * time.Minute

// sqlQueue is a tipkv DB on sqlkv and one queue on it.
type sqlQueue struct {
	db *tipkv.DB
	q  *queue.Queue[[]byte]
}

func openSQLQueue(ctx context.Context, dsn, table string) (*sqlQueue, error) {
	db, err := sqlkv.Open(ctx, sqlkv.Config{DSN: dsn, Table: table}, nil)
	if err != nil {
		return nil, err
	}
	q, err := queue.Open(db, "jobs", &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &sqlQueue{db: db, q: q}, nil
}

// enqueue is one Enqueue of items: one Update, one transaction.
func (s *sqlQueue) enqueue(items [][]byte) error {
	_, err := s.q.Enqueue(s.db, items...)
	return err
}

// preload enqueues n items of gen, per to an Update.
func (s *sqlQueue) preload(gen *valueGen, n, per int) error {
	for n > 0 {
		k := min(n, per)
		if err := s.enqueue(gen.next(k)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (s *sqlQueue) close() error { return s.db.Close() }

// burnDownTipkv works the n messages of the queue on the tables' first
// handle with workers goroutines, each a loop of ReceiveWait of up to per
// messages and one Ack of what it got (the consumer loop of the queue
// package's doc), on handles[i % len(handles)]: one handle shared by
// every worker, or one each. It returns the wall time from the workers'
// start to the last Ack's return, and how many ReceiveWait calls
// returned messages.
func burnDownTipkv(ctx context.Context, handles []*sqlQueue, workers, n, per int) (time.Duration, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var acked, calls atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		h := handles[w%len(handles)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msgs, err := h.q.ReceiveWait(ctx, per, burnLease)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					cancel()
					return
				}
				calls.Add(1)
				ids := make([]queue.ID, len(msgs))
				for i, m := range msgs {
					if len(m.Value) == 0 {
						errs <- errors.New("tipkv: an empty job")
						cancel()
						return
					}
					ids[i] = m.ID
				}
				if err := h.q.Ack(h.db, ids...); err != nil {
					errs <- err
					cancel()
					return
				}
				if acked.Add(int64(len(ids))) >= int64(n) {
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	if a := acked.Load(); a != int64(n) {
		return 0, 0, fmt.Errorf("tipkv: %d of %d jobs acknowledged", a, n)
	}
	return el, calls.Load(), nil
}

// xacts returns the transactions the server's current database has
// committed and rolled back so far (pg_stat_database: each backend
// reports its own within about a second).
func xacts(ctx context.Context, dsn string) (commits, rollbacks int64, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&commits, &rollbacks)
	return commits, rollbacks, err
}

// dropTable drops a table a side is done with, so the server carries
// only the tables in use.
func dropTable(ctx context.Context, dsn, table string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
	return err
}
