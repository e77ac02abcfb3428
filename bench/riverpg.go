package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
)

// The riverpg section pairs tipkv's queue through sqlkv with River
// (github.com/riverqueue/river with riverdriver/riverpgxv5), the job
// queue most Go teams on PostgreSQL pick, on one PostgreSQL server that
// the section starts (sqlkv/pgtest, as sqlkv's tests and benchmarks do;
// SQLKV_DSN names another) (issue 28): inserts one and a hundred per
// transaction, a burn-down of a preloaded queue by 8 and 32 workers, and
// the time from an insert's commit to a worker holding the job. Both
// sides commit on the same server with its synchronous_commit, so their
// durability is the same. Every row is wall time: the work is the
// server's, in other processes.

const (
	sysRiverTuned = "River riverbench"  // River with riverbench's fetch timing (riverBench)
	sideTipkvEach = "tipkv handle each" // tipkv with a sqlkv handle per worker
	riverInsertQ  = "insert"            // the queue the insert rows fill; no client works it
	riverBurnQ    = "burn"
)

type riverPGResult struct {
	table *table
	// latency holds every commit-to-worker time measured, per system, in
	// nanoseconds, for the chart.
	latency map[string][]float64
}

func runRiverPG(cfg config) (*riverPGResult, error) {
	ctx := context.Background()
	srv, err := pgtest.Start()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dsn := srv.DSN()
	settings, err := serverSettings(ctx, dsn)
	if err != nil {
		return nil, err
	}
	progress("riverpg: PostgreSQL %s", settings)
	if err := migrateRiver(ctx, dsn); err != nil {
		return nil, fmt.Errorf("river: migrate: %w", err)
	}

	t := &table{title: fmt.Sprintf("Queues on PostgreSQL: tipkv through sqlkv and River (riverpgxv5), %d-byte jobs", cfg.ValueSize),
		systems: []string{sysTipkv, sysRiver, sysRiverTuned}}
	res := &riverPGResult{table: t, latency: map[string][]float64{}}
	if err := pgInsertRows(ctx, cfg, srv, t); err != nil {
		return nil, err
	}
	if err := pgBurnRows(ctx, cfg, srv, t); err != nil {
		return nil, err
	}
	if err := pgLatencyRows(ctx, cfg, srv, res); err != nil {
		return nil, err
	}
	t.notes = append(t.notes,
		fmt.Sprintf("Server: %s, on loopback, started by sqlkv/pgtest for this run (or the one SQLKV_DSN names); both systems commit on it with its settings, so with the same durability.", settings),
		fmt.Sprintf("tipkv: sqlkv.Open (a pool of sqlkv's default 16 connections, LISTEN/NOTIFY on, its default NotifyFamilies), a queue.Queue of raw bytes, MaxAttempts -1; "+
			"insert is Enqueue (one Update); a burn-down worker loops on ReceiveWait of up to %d with a %s lease and one Ack of what it got, the queue package's consumer loop, "+
			"all workers on one handle (the first burn-down rows) or each on a handle of its own; the latency consumer sleeps in ReceiveWait(ctx, 1, ...) on a handle other than the producer's.",
			cfg.PGBurnPer, burnLease),
		fmt.Sprintf("River v0.51.2 with riverpgxv5 v0.51.2 (pgx v5.12.0), River's migrations applied by rivermigrate; each client on a pgxpool of %d connections; "+
			"args {\"v\": <base64 of the value>}; insert is Client.Insert (its own transaction), a hundred one InsertMany (one transaction); "+
			"a burn-down client has MaxWorkers = the workers, a Work that returns nil, and counts a job done at its completed event "+
			"(River marks jobs completed in batches after Work returns; riverbench counts them the same way); "+
			"the latency client has MaxWorkers 1, its insert-only producer client a pool of its own. "+
			"River: River's defaults (FetchCooldown 100 ms, FetchPollInterval 1 s; an inserting client notifies a queue at most once per FetchCooldown). "+
			"%s: the fetch timing River's own benchmark runs with (cmd/river/riverbench: FetchCooldown 2 ms, FetchPollInterval 20 ms), "+
			"the burn-down's River side (unless -riverdefaults): with the defaults a client fetches at most MaxWorkers jobs per 100 ms, %d jobs/s at 8 workers and %d at 32.",
			riverPool, sysRiverTuned, 8*10, 32*10),
		fmt.Sprintf("Insert rows: a chunk is %d calls of 1 or %d of %d per system, rounds as the rest of bench/ (stops at +-%.0f%%, %d rounds or %s). "+
			"Burn-down rows: %d rounds; a round preloads %s jobs into each side (untimed: tipkv %d per Update, River InsertMany of %d) and times from the workers' start to the last job done; "+
			"the table's figure is wall time per job (its inverse is jobs/s) and the ratio of the totals. "+
			"Latency rows: %d rounds of %d jobs per system, one at a time, each inserted a random 5-105 ms after the worker took the last, timed from the insert call (its commit included) to the worker holding the job; "+
			"the p50 row is the median of each round's median with the per-round ratios' interval, the p99 row the 99th percentile of all %d jobs of each system.",
			cfg.PGInsertCalls, max(cfg.PGInsertCalls/10, 1), cfg.EnqueueBatch, 100*cfg.Target, cfg.MaxRounds, cfg.RowTime,
			cfg.PGBurnRounds, thousands(cfg.PGJobs), pgPreloadBatch, pgPreloadBatch,
			cfg.PGLatencyRounds, cfg.PGLatencyJobs, cfg.PGLatencyRounds*cfg.PGLatencyJobs))
	return res, nil
}

// pgPreloadBatch is how many jobs a preload writes per transaction.
const pgPreloadBatch = 1000

// serverSettings describes the server's version and the settings that
// decide a commit's durability.
func serverSettings(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var version, sc, fsync, fpw string
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit'), current_setting('fsync'), current_setting('full_page_writes')").
		Scan(&version, &sc, &fsync, &fpw)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("PostgreSQL %s, synchronous_commit=%s, fsync=%s, full_page_writes=%s", version, sc, fsync, fpw), nil
}

// pgInsertRows measures inserts of 1 and EnqueueBatch per transaction:
// tipkv's Enqueue against River's Insert and InsertMany, with River's
// default fetch timing (which decides how often an insert notifies) and
// riverbench's.
func pgInsertRows(ctx context.Context, cfg config, srv *pgtest.Server, t *table) error {
	tk, err := openSQLQueue(ctx, srv.DSN(), srv.NewTable())
	if err != nil {
		return fmt.Errorf("tipkv: %w", err)
	}
	defer tk.close()
	rvDefault, err := openRiverPG(ctx, srv.DSN(), riverDefaults, "", 0, nil)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	defer rvDefault.close()
	rvTuned, err := openRiverPG(ctx, srv.DSN(), riverBench, "", 0, nil)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	defer rvTuned.close()

	for _, per := range []int{1, cfg.EnqueueBatch} {
		calls := cfg.PGInsertCalls
		if per > 1 {
			calls = max(calls/10, 1)
		}
		chunk := func(name string, seed uint64, insert func([][]byte) error) side {
			gen := newValueGen(seed, cfg.ValueSize)
			return side{system: name, chunk: func() (float64, error) {
				items := gen.next(calls * per)
				return timeChunk(func() (int, error) {
					for i := range calls {
						if err := insert(items[i*per : (i+1)*per]); err != nil {
							return i * per, err
						}
					}
					return calls * per, nil
				}, 0, true)
			}}
		}
		sides := []side{
			chunk(sysTipkv, cfg.Seed+60, tk.enqueue),
			chunk(sysRiver, cfg.Seed+61, func(items [][]byte) error { return rvDefault.insert(riverInsertQ, items) }),
			chunk(sysRiverTuned, cfg.Seed+62, func(items [][]byte) error { return rvTuned.insert(riverInsertQ, items) }),
		}
		op := fmt.Sprintf("insert, %d per transaction", per)
		progress("riverpg: %s", op)
		r, err := runPaired(sides, cfg.writePlan())
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		t.addPaired("", op, "ns/item", r, true)
	}
	return nil
}

// pgBurnRows measures burn-downs of PGJobs preloaded jobs by each worker
// count: tipkv with every worker on one handle and with a handle per
// worker, River with riverbench's fetch timing. Each side preloads through
// a connection of its own that it closes before the burn-down, and closes
// the burn-down's connections before the server's counters are read
// (tx), so that the counters hold the burn-down's transactions alone.
func pgBurnRows(ctx context.Context, cfg config, srv *pgtest.Server, t *table) error {
	dsn := srv.DSN()
	n := cfg.PGJobs
	burnSys, burnTuning := sysRiverTuned, riverBench
	if cfg.PGBurnRiverDefaults {
		burnSys, burnTuning = sysRiver, riverDefaults
	}
	tx := &burnTx{ctx: ctx, dsn: dsn, n: n, sums: map[string][3]float64{}, runs: map[string]int{}}
	for _, workers := range cfg.PGWorkers {
		tipkvSide := func(name string, seed uint64, handles int) side {
			gen := newValueGen(seed, cfg.ValueSize)
			return side{system: name, chunk: func() (float64, error) {
				table := srv.NewTable()
				defer func() { _ = dropTable(ctx, dsn, table) }()
				pre, err := openSQLQueue(ctx, dsn, table)
				if err != nil {
					return 0, err
				}
				err = pre.preload(gen, n, pgPreloadBatch)
				if err = errors.Join(err, pre.close()); err != nil {
					return 0, err
				}
				var hs []*sqlQueue
				closeAll := func() (err error) {
					for _, h := range hs {
						err = errors.Join(err, h.close())
					}
					hs = nil
					return err
				}
				defer closeAll()
				for range handles {
					h, err := openSQLQueue(ctx, dsn, table)
					if err != nil {
						return 0, err
					}
					hs = append(hs, h)
				}
				c0, r0, err := xacts(ctx, dsn)
				if err != nil {
					return 0, err
				}
				el, calls, err := burnDownTipkv(ctx, hs, workers, n, cfg.PGBurnPer)
				if err = errors.Join(err, closeAll()); err != nil {
					return 0, err
				}
				tx.add(name, workers, calls, c0, r0, el)
				return float64(el.Nanoseconds()) / float64(n), nil
			}}
		}
		gen := newValueGen(cfg.Seed+72, cfg.ValueSize)
		riverSide := side{system: burnSys, chunk: func() (float64, error) {
			pre, err := openRiverPG(ctx, dsn, riverDefaults, "", 0, nil)
			if err != nil {
				return 0, err
			}
			err = pre.truncate()
			for left := n; left > 0 && err == nil; left -= pgPreloadBatch {
				err = pre.insert(riverBurnQ, gen.next(min(left, pgPreloadBatch)))
			}
			pre.close()
			if err != nil {
				return 0, err
			}
			c0, r0, err := xacts(ctx, dsn)
			if err != nil {
				return 0, err
			}
			el, err := burnDownRiver(ctx, dsn, burnTuning, riverBurnQ, workers, n)
			if err != nil {
				return 0, err
			}
			tx.add(burnSys, workers, 0, c0, r0, el)
			return float64(el.Nanoseconds()) / float64(n), nil
		}}
		sides := []side{tipkvSide(sysTipkv, cfg.Seed+70, 1), tipkvSide(sideTipkvEach, cfg.Seed+71, workers), riverSide}
		op := fmt.Sprintf("burn-down of %s jobs, %d workers", thousands(n), workers)
		progress("riverpg: %s", op)
		r, err := runPaired(sides, fixedPlan(cfg.PGBurnRounds))
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		t.addPaired("", op+", tipkv on one handle", "ns/item", r.pair(sysTipkv, burnSys, "", ""), true)
		t.addPaired("", op+", tipkv a handle per worker", "ns/item", r.pair(sideTipkvEach, burnSys, sysTipkv, ""), true)
	}
	t.notes = append(t.notes, tx.note(cfg.PGWorkers))
	return nil
}

// burnTx gathers what the server did for the burn-downs: transactions
// committed and rolled back per 1,000 jobs (read from pg_stat_database
// before and after each burn-down, once its connections have closed: a
// backend reports its counters when it exits), and tipkv's ReceiveWait
// calls.
type burnTx struct {
	ctx  context.Context
	dsn  string
	n    int
	sums map[string][3]float64 // per side and workers: commits, rollbacks, calls, summed over rounds
	runs map[string]int
}

func (b *burnTx) add(side string, workers int, calls, c0, r0 int64, el time.Duration) {
	time.Sleep(500 * time.Millisecond) // the closed connections' backends exit, and report
	c1, r1, err := xacts(b.ctx, b.dsn)
	if err != nil {
		progress("    %s: server counters: %v", side, err)
		return
	}
	key := fmt.Sprintf("%s/%d", side, workers)
	s := b.sums[key]
	s[0] += float64(c1 - c0)
	s[1] += float64(r1 - r0)
	s[2] += float64(calls)
	b.sums[key] = s
	b.runs[key]++
	extra := ""
	if calls > 0 {
		extra = fmt.Sprintf(", %d ReceiveWait calls (%.1f jobs a call)", calls, float64(b.n)/float64(calls))
	}
	progress("    %s, %d workers: %s jobs in %s (%.0f jobs/s); server: %d commits, %d rollbacks%s",
		side, workers, thousands(b.n), el.Round(time.Millisecond), float64(b.n)/el.Seconds(), c1-c0, r1-r0, extra)
}

// note says, per side and worker count, the transactions per 1,000 jobs.
func (b *burnTx) note(workers []int) string {
	var parts []string
	for _, w := range workers {
		for _, side := range []string{sysTipkv, sideTipkvEach, sysRiver, sysRiverTuned} {
			key := fmt.Sprintf("%s/%d", side, w)
			k := float64(b.runs[key] * b.n / 1000)
			if k == 0 {
				continue
			}
			s := b.sums[key]
			name := map[string]string{sysTipkv: "tipkv on one handle", sideTipkvEach: "tipkv a handle per worker", sysRiver: "River (defaults)", sysRiverTuned: sysRiverTuned}[side]
			p := fmt.Sprintf("%s at %d workers %.0f committed, %.0f rolled back", name, w, s[0]/k, s[1]/k)
			if s[2] > 0 {
				p += fmt.Sprintf(" (%.1f jobs per ReceiveWait)", float64(b.runs[key]*b.n)/s[2])
			}
			parts = append(parts, p)
		}
	}
	return "What the burn-downs cost the server, transactions per 1,000 jobs (pg_stat_database, all rounds; " +
		"preloads excluded, River's own background work and every client's counted): " + strings.Join(parts, "; ") + "."
}

// pgLatencyRows measures the time from an insert call to a worker
// holding the job, one job at a time: tipkv's consumer asleep in
// ReceiveWait on one handle, the producer on another; River's worker
// client (MaxWorkers 1, its notifier listening) with an insert-only
// client of the same fetch timing as the producer, for both timings.
func pgLatencyRows(ctx context.Context, cfg config, srv *pgtest.Server, res *riverPGResult) error {
	dsn := srv.DSN()
	table := srv.NewTable()
	prod, err := openSQLQueue(ctx, dsn, table)
	if err != nil {
		return fmt.Errorf("tipkv: %w", err)
	}
	defer prod.close()
	cons, err := openSQLQueue(ctx, dsn, table)
	if err != nil {
		return fmt.Errorf("tipkv: %w", err)
	}
	defer cons.close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 80))
	gap := func() time.Duration {
		return 5*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
	}

	// sample runs PGLatencyJobs jobs (after one not counted, which wakes
	// the consumer up) through insert and got, and returns their times.
	sample := func(system string, insert func(v []byte) error, got <-chan time.Time, gen *valueGen) (float64, error) {
		var ds []float64
		for i := range cfg.PGLatencyJobs + 1 {
			time.Sleep(gap())
			t0 := time.Now()
			if err := insert(gen.next(1)[0]); err != nil {
				return 0, err
			}
			select {
			case t1 := <-got:
				if i > 0 {
					ds = append(ds, float64(t1.Sub(t0).Nanoseconds()))
				}
			case <-time.After(time.Minute):
				return 0, errors.New("no worker took the job within a minute")
			}
		}
		res.latency[system] = append(res.latency[system], ds...)
		return median(ds), nil
	}

	tipkvSide := side{system: sysTipkv, chunk: func() (float64, error) {
		got := make(chan time.Time)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			for {
				ms, err := cons.q.ReceiveWait(cctx, 1, burnLease)
				if cctx.Err() != nil {
					errc <- nil
					return
				}
				if err == nil && len(ms) != 1 {
					err = fmt.Errorf("tipkv: ReceiveWait returned %d messages", len(ms))
				}
				if err != nil {
					errc <- err
					return
				}
				got <- time.Now()
				if err := cons.q.Ack(cons.db, ms[0].ID); err != nil {
					errc <- err
					return
				}
			}
		}()
		v, err := sample(sysTipkv, prod.enqueue1, got, newValueGen(cfg.Seed+81, cfg.ValueSize))
		cancel()
		return v, errors.Join(err, <-errc)
	}}
	riverSide := func(system string, tuning riverTuning, seed uint64) (side, func(), error) {
		queue := "latency-" + tuning.name
		got := make(chan time.Time, 1)
		worker, err := openRiverPG(ctx, dsn, tuning, queue, 1, func(*river.Job[riverItem]) { got <- time.Now() })
		if err != nil {
			return side{}, nil, err
		}
		producer, err := openRiverPG(ctx, dsn, tuning, "", 0, nil)
		if err != nil {
			worker.close()
			return side{}, nil, err
		}
		gen := newValueGen(seed, cfg.ValueSize)
		s := side{system: system, chunk: func() (float64, error) {
			if err := worker.client.Start(ctx); err != nil {
				return 0, err
			}
			v, err := sample(system, func(v []byte) error { return producer.insert(queue, [][]byte{v}) }, got, gen)
			stopCtx, stop := context.WithTimeout(ctx, time.Minute)
			defer stop()
			return v, errors.Join(err, worker.client.Stop(stopCtx))
		}}
		return s, func() { worker.close(); producer.close() }, nil
	}
	rvDefault, closeDefault, err := riverSide(sysRiver, riverDefaults, cfg.Seed+82)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	defer closeDefault()
	rvTuned, closeTuned, err := riverSide(sysRiverTuned, riverBench, cfg.Seed+83)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	defer closeTuned()

	op := "commit to a worker holding the job, one at a time"
	progress("riverpg: %s", op)
	r, err := runPaired([]side{tipkvSide, rvDefault, rvTuned}, fixedPlan(cfg.PGLatencyRounds))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	r.totals = false // a row of medians: the geometric mean of the per-round ratios
	res.table.addPaired("", op+", p50", "ns/op", r, true)
	p99 := map[string]float64{}
	for s, ds := range res.latency {
		p99[s] = percentile(ds, 0.99)
	}
	res.table.addSingle("", op+", p99", "ns/op", p99)
	res.table.rows[len(res.table.rows)-1].wall = true
	return nil
}

// enqueue1 enqueues one value.
func (s *sqlQueue) enqueue1(v []byte) error { return s.enqueue([][]byte{v}) }

// percentile returns the q-quantile of xs, the nearest rank.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(max(int(math.Ceil(q*float64(len(s))))-1, 0), len(s)-1)]
}
