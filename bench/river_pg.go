package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River on PostgreSQL: github.com/riverqueue/river through its pgx v5
// driver, on the server the riverpg section starts. Every client has a
// pool of its own, as a process would; the pools are the size of
// sqlkv's default (riverPool), so neither side has more connections to
// work with.

// riverPool is the size of every River client's pool: sqlkv.Config's
// default MaxConns, the pool tipkv's handles get.
const riverPool = 16

// riverTuning is a River client's fetch timing. River's defaults fetch at
// most every 100 ms (FetchCooldown) and poll every second; its own
// benchmark (cmd/river/riverbench) runs with 2 ms and 20 ms, "much better
// than the client's default values" for throughput. The section measures
// the rows where it matters with both.
type riverTuning struct {
	name              string
	fetchCooldown     time.Duration // 0: River's default
	fetchPollInterval time.Duration // 0: River's default
}

var (
	riverDefaults = riverTuning{name: "defaults"}
	riverBench    = riverTuning{name: "riverbench", fetchCooldown: 2 * time.Millisecond, fetchPollInterval: 20 * time.Millisecond}
)

// riverPG is one River client and its pool.
type riverPG struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	ctx    context.Context
	params []river.InsertManyParams // reused by insert
}

var discardLog = slog.New(slog.DiscardHandler)

// newRiverPool opens a pool of riverPool connections on dsn.
func newRiverPool(ctx context.Context, dsn, app string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = riverPool
	pc.ConnConfig.RuntimeParams["application_name"] = app
	return pgxpool.NewWithConfig(ctx, pc)
}

// migrateRiver applies River's migrations to the database dsn names.
func migrateRiver(ctx context.Context, dsn string) error {
	pool, err := newRiverPool(ctx, dsn, "river-migrate")
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: discardLog})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// openRiverPG opens a River client on a pool of its own. With no queue it
// is insert-only (it starts nothing); with one, it works that queue with
// maxWorkers workers of items and calls worked (when not nil) from each
// job's Work, which returns nil at once.
func openRiverPG(ctx context.Context, dsn string, tuning riverTuning, queue string, maxWorkers int, worked func(*river.Job[riverItem])) (*riverPG, error) {
	pool, err := newRiverPool(ctx, dsn, "river")
	if err != nil {
		return nil, err
	}
	cfg := &river.Config{Logger: discardLog, FetchCooldown: tuning.fetchCooldown, FetchPollInterval: tuning.fetchPollInterval}
	if queue != "" {
		workers := river.NewWorkers()
		river.AddWorker(workers, river.WorkFunc(func(_ context.Context, j *river.Job[riverItem]) error {
			if worked != nil {
				worked(j)
			}
			return nil
		}))
		cfg.Queues = map[string]river.QueueConfig{queue: {MaxWorkers: maxWorkers}}
		cfg.Workers = workers
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &riverPG{pool: pool, client: client, ctx: ctx}, nil
}

// insert inserts one job per value into queue: one Insert (its own
// transaction) for one value, one InsertMany (one transaction) for more,
// and checks that each was inserted.
func (r *riverPG) insert(queue string, items [][]byte) error {
	opts := &river.InsertOpts{Queue: queue}
	if len(items) == 1 {
		res, err := r.client.Insert(r.ctx, riverItem{V: items[0]}, opts)
		if err == nil && (res.Job == nil || res.UniqueSkippedAsDuplicate) {
			err = errors.New("river: insert returned no new job")
		}
		return err
	}
	r.params = r.params[:0]
	for _, it := range items {
		r.params = append(r.params, river.InsertManyParams{Args: riverItem{V: it}, InsertOpts: opts})
	}
	res, err := r.client.InsertMany(r.ctx, r.params)
	if err == nil && len(res) != len(items) {
		err = fmt.Errorf("river: inserted %d of %d", len(res), len(items))
	}
	return err
}

// truncate empties River's job table: what a burn-down leaves completed
// and what the insert rows left available.
func (r *riverPG) truncate() error {
	_, err := r.pool.Exec(r.ctx, "TRUNCATE river_job")
	return err
}

// burnDown works the n jobs already in queue with a client of workers
// workers and returns the wall time from its Start to the last job's
// completion written (the completed event: River completes jobs in
// batches after Work returns, as riverbench counts them).
func burnDownRiver(ctx context.Context, dsn string, tuning riverTuning, queue string, workers, n int) (time.Duration, error) {
	var worked atomic.Int64
	r, err := openRiverPG(ctx, dsn, tuning, queue, workers, func(*river.Job[riverItem]) { worked.Add(1) })
	if err != nil {
		return 0, err
	}
	defer r.pool.Close()
	events, cancel := r.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000, // never full: a full channel drops events
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	start := time.Now()
	if err := r.client.Start(ctx); err != nil {
		return 0, err
	}
	var el time.Duration
	for done := 0; done < n; {
		select {
		case ev := <-events:
			if ev == nil {
				return 0, errors.New("river: the subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("river: job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-time.After(2 * time.Minute):
			return 0, fmt.Errorf("river: %d of %d jobs completed, then none for 2 minutes", done, n)
		}
	}
	el = time.Since(start)
	stopCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := r.client.Stop(stopCtx); err != nil {
		return 0, err
	}
	if w := worked.Load(); w != int64(n) {
		return 0, fmt.Errorf("river: %d jobs worked for %d completed", w, n)
	}
	return el, nil
}

func (r *riverPG) close() { r.pool.Close() }
