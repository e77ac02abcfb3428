package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the pure-Go SQLite River's SQLite driver runs on here
)

// riverItem is a River job of one value: River stores a job's args as
// JSON, so the 100 bytes travel base64-encoded.
type riverItem struct {
	V []byte `json:"v"`
}

func (riverItem) Kind() string { return "item" }

// riverKeyedItem is a River job whose uniqueness is its key alone: with
// UniqueOpts.ByArgs only the fields tagged river:"unique" are hashed, so
// the key plays the part of tipkv's idempotency key and the value travels
// beside it.
type riverKeyedItem struct {
	K string `json:"k" river:"unique"`
	V []byte `json:"v"`
}

func (riverKeyedItem) Kind() string { return "keyed" }

// riverUnique is how every unique insert here asks for uniqueness: by the
// args' unique fields, in River's default states (available, completed,
// pending, running, retryable, scheduled).
var riverUnique = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

// riverQueue is an insert-only River client (no queues, no workers: it
// starts nothing) on SQLite through riversqlite and modernc.org/sqlite: one
// database file in WAL mode, one connection (the driver's advice).
// Synced, every commit syncs the WAL (synchronous=FULL, SQLite's default);
// unsynced, nothing is synced (synchronous=OFF).
type riverQueue struct {
	db     *sql.DB
	client *river.Client[*sql.Tx]
	ctx    context.Context
	params []river.InsertManyParams // reused by insertMany
}

func openRiver(dir string, cfg config, synced bool) (*riverQueue, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sync := "OFF"
	if synced {
		sync = "FULL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cfg.CacheSize>>10)) // the run's block cache budget, in KiB
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.db")+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	fail := func(err error) (*riverQueue, error) {
		return nil, errors.Join(err, db.Close())
	}
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	driver := riversqlite.New(db)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return fail(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}
	client, err := river.NewClient(driver, &river.Config{Logger: quiet})
	if err != nil {
		return fail(err)
	}
	return &riverQueue{db: db, client: client, ctx: ctx}, nil
}

// insert inserts one job per value: one Insert for one value, one
// InsertMany (one transaction, one statement) for more.
func (r *riverQueue) insert(items [][]byte) error {
	if len(items) == 1 {
		res, err := r.client.Insert(r.ctx, riverItem{V: items[0]}, nil)
		if err == nil && res.Job == nil {
			err = errors.New("river: insert returned no job")
		}
		return err
	}
	r.params = r.params[:0]
	for _, it := range items {
		r.params = append(r.params, river.InsertManyParams{Args: riverItem{V: it}})
	}
	return r.insertMany(len(items), false)
}

// insertUnique inserts one unique job per key, keys[i] with items[i], as
// insert does, and checks that each was new or, with dup, that each was
// skipped as a duplicate.
func (r *riverQueue) insertUnique(keys []string, items [][]byte, dup bool) error {
	if len(items) == 1 {
		res, err := r.client.Insert(r.ctx, riverKeyedItem{K: keys[0], V: items[0]}, riverUnique)
		if err != nil {
			return err
		}
		if res.UniqueSkippedAsDuplicate != dup {
			return fmt.Errorf("river: key %q: skipped as duplicate %v, want %v", keys[0], res.UniqueSkippedAsDuplicate, dup)
		}
		return nil
	}
	r.params = r.params[:0]
	for i, it := range items {
		r.params = append(r.params, river.InsertManyParams{Args: riverKeyedItem{K: keys[i], V: it}, InsertOpts: riverUnique})
	}
	return r.insertMany(len(items), dup)
}

func (r *riverQueue) insertMany(n int, dup bool) error {
	res, err := r.client.InsertMany(r.ctx, r.params)
	if err != nil {
		return err
	}
	if len(res) != n {
		return fmt.Errorf("river: inserted %d of %d", len(res), n)
	}
	for _, x := range res {
		if x.UniqueSkippedAsDuplicate != dup {
			return fmt.Errorf("river: job %d: skipped as duplicate %v, want %v", x.Job.ID, x.UniqueSkippedAsDuplicate, dup)
		}
	}
	return nil
}

func (r *riverQueue) close() error { return r.db.Close() }
