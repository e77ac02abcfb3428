package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

// errEmpty is what a queueStore's dequeue returns when nothing is queued.
var errEmpty = errors.New("queue empty")

// A queueStore is a FIFO queue of byte values on disk, dequeued at most
// once (the items are removed as they are returned).
type queueStore interface {
	// enqueue appends items, in one write where the system has batches.
	enqueue(items [][]byte) error
	// dequeue removes up to n of the oldest items, in one call where the
	// system has one, copies their values out and returns how many it
	// removed.
	dequeue(n int) (int, error)
	// consume removes the n oldest items for a test's setup, leaving on
	// disk what n dequeues would leave, only faster.
	consume(n int) error
	close() error
}

type point struct{ x, y float64 }

type queuesResult struct {
	table    *table
	systems  []string
	dequeue  map[string][]point // consumed items -> ns per single dequeue
	spread   map[string][]point // consumed items -> interquartile range of the rounds, as (low, high)
	churn    map[string][]point // cycles -> bytes on disk
	cycles   int
	consumed []int
}

type queueSystem struct {
	name string
	// open opens a new queue in dir; churn is true for the churn test. A
	// system that cannot sync its writes has no openSynced.
	open       func(dir string, churn bool) (queueStore, error)
	openSynced func(dir string) (queueStore, error)
}

func queueSystems(cfg config) []queueSystem {
	return []queueSystem{
		{sysTipkv,
			func(dir string, _ bool) (queueStore, error) { return openTipkvQueue(dir, cfg, false) },
			func(dir string) (queueStore, error) { return openTipkvQueue(dir, cfg, true) }},
		{sysGoque, func(dir string, _ bool) (queueStore, error) { return openGoque(dir) }, nil},
		{sysDque,
			func(dir string, _ bool) (queueStore, error) { return openDque(dir, false) },
			func(dir string) (queueStore, error) { return openDque(dir, true) }},
		{sysBigqueue,
			func(dir string, _ bool) (queueStore, error) { return openBigqueue(dir, false) },
			func(dir string) (queueStore, error) { return openBigqueue(dir, true) }},
		{sysNaive,
			func(dir string, churn bool) (queueStore, error) { return openNaiveQueue(dir, cfg, churn, false) },
			func(dir string) (queueStore, error) { return openNaiveQueue(dir, cfg, false, true) }},
	}
}

// openQueues opens a new queue per system under parent, named prefix-system.
func openQueues(systems []queueSystem, parent, prefix string, open func(queueSystem, string) (queueStore, error)) ([]queueStore, func(), error) {
	var qs []queueStore
	closeAll := func() {
		for _, q := range qs {
			_ = q.close()
		}
	}
	for _, s := range systems {
		q, err := open(s, filepath.Join(parent, prefix+"-"+slug(s.name)))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		qs = append(qs, q)
	}
	return qs, closeAll, nil
}

func runQueues(cfg config, parent string) (*queuesResult, error) {
	systems := queueSystems(cfg)
	res := &queuesResult{
		table:    &table{title: fmt.Sprintf("Queues: %d-byte items", cfg.ValueSize)},
		dequeue:  map[string][]point{},
		spread:   map[string][]point{},
		churn:    map[string][]point{},
		cycles:   cfg.ChurnCycles,
		consumed: cfg.Consumed,
	}
	t := res.table
	for _, s := range systems {
		res.systems = append(res.systems, s.name)
		t.systems = append(t.systems, s.name)
	}
	if err := enqueueRows(cfg, systems, parent, t); err != nil {
		return nil, err
	}
	if err := dequeueRows(cfg, systems, parent, res); err != nil {
		return nil, err
	}
	if err := churnRows(cfg, systems, parent, res); err != nil {
		return nil, fmt.Errorf("churn: %w", err)
	}
	t.notes = append(t.notes,
		"tipkv dequeues with Pop (at most once, like goque's, dque's and bigqueue's Dequeue); the naive queue seeks to <queue, 0>, reads from there and deletes with point deletes in one batch. "+
			"goque, dque and bigqueue have no batches: a batch of n is n Enqueue or Dequeue calls. goque cannot sync its writes (it opens LevelDB with no options), so it has no synced rows. "+
			fmt.Sprintf("dque runs in turbo mode (no fsync) with %s items per segment file; synced, each commit ends with TurboSync. ", thousands(dqueItemsPerSegment))+
			"bigqueue runs with its periodic flush off; synced, each commit ends with Flush (msync). bigqueue never deletes a consumed arena file. "+
			fmt.Sprintf("A dequeue row takes at most %s items per system one per call and %s %d per call, fewer where the next level is nearer (a fifth and four fifths of the way to it). ",
				thousands(cfg.DequeueItems/5), thousands(cfg.DequeueItems*4/5), cfg.DequeueBatch)+
			"In the churn test the naive queue finds its head from memory (same writes, same disk use; the seek cost is the dequeue rows), so it has no churn-cycle time. "+
			cfg.method())
	return res, nil
}

// enqueueRows measures enqueues of 1 and of EnqueueBatch items per commit,
// unsynced, then synced.
func enqueueRows(cfg config, systems []queueSystem, parent string, t *table) error {
	for _, synced := range []bool{false, true} {
		var use []queueSystem
		for _, s := range systems {
			if !synced || s.openSynced != nil {
				use = append(use, s)
			}
		}
		prefix := "enqueue"
		if synced {
			prefix = "enqueue-synced"
		}
		qs, closeAll, err := openQueues(use, parent, prefix, func(s queueSystem, dir string) (queueStore, error) {
			if synced {
				return s.openSynced(dir)
			}
			return s.open(dir, false)
		})
		if err != nil {
			return err
		}
		for _, batch := range []int{1, cfg.EnqueueBatch} {
			commits := max(cfg.EnqueueItems/batch, 1)
			if synced {
				commits = cfg.SyncChunk
			}
			var sides []side
			for k, s := range use {
				q, quiet := qs[k], cfg.writeQuiet(s.name)
				if synced {
					quiet = 0 // wall time, and nothing in the background worth the wait
				}
				gen := newValueGen(cfg.Seed+20+uint64(k), cfg.ValueSize)
				sides = append(sides, side{system: s.name, chunk: func() (float64, error) {
					items := gen.next(commits * batch)
					return timeChunk(func() (int, error) {
						for c := range commits {
							if err := q.enqueue(items[c*batch : (c+1)*batch]); err != nil {
								return c * batch, err
							}
						}
						return commits * batch, nil
					}, quiet, synced)
				}})
			}
			op := fmt.Sprintf("enqueue, %d per commit", batch)
			if synced {
				op += ", synced"
			}
			progress("queues: %s", op)
			r, err := runPaired(sides, cfg.writePlan())
			if err != nil {
				closeAll()
				return fmt.Errorf("%s: %w", op, err)
			}
			t.addPaired("", op, "ns/item", r, synced)
		}
		closeAll()
	}
	return nil
}

// dequeueRows fills a queue per system, then at each level of consumed
// items measures single dequeues, and at the table's levels batched ones.
func dequeueRows(cfg config, systems []queueSystem, parent string, res *queuesResult) error {
	qs, closeAll, err := openQueues(systems, parent, "queue", func(s queueSystem, dir string) (queueStore, error) { return s.open(dir, false) })
	if err != nil {
		return err
	}
	defer closeAll()
	levels := cfg.Consumed
	last := levels[len(levels)-1]
	total := last + 2*cfg.DequeueItems + cfg.EnqueueBatch
	total = (total + cfg.EnqueueBatch - 1) / cfg.EnqueueBatch * cfg.EnqueueBatch
	for k, s := range systems {
		progress("queues: %s: enqueueing %d items", s.name, total)
		gen := newValueGen(cfg.Seed+7, cfg.ValueSize)
		for n := 0; n < total; n += cfg.EnqueueBatch {
			if err := qs[k].enqueue(gen.next(cfg.EnqueueBatch)); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	settleDown(cfg.Quiet)

	consumed := make([]int, len(systems)) // per system
	for li, level := range levels {
		for k, s := range systems {
			if level > consumed[k] {
				if err := qs[k].consume(level - consumed[k]); err != nil {
					return fmt.Errorf("%s: consume: %w", s.name, err)
				}
				consumed[k] = level
			}
		}
		settleDown(cfg.Quiet)
		room := cfg.DequeueItems
		if li+1 < len(levels) {
			room = min(room, levels[li+1]-level)
		}
		type rowSpec struct {
			n, budget int
		}
		rows := []rowSpec{{1, min(room, cfg.DequeueItems/5)}}
		if slices.Contains(cfg.TableConsumed, level) {
			rows = []rowSpec{{1, min(room/5, cfg.DequeueItems/5)}, {cfg.DequeueBatch, min(room*4/5, cfg.DequeueItems)}}
		}
		for _, rs := range rows {
			var sides []side
			for k, s := range systems {
				sd, err := dequeueSide(cfg, s.name, qs[k], &consumed[k], rs.n, rs.budget, cfg.writePlan().most(len(systems)))
				if err != nil {
					return err
				}
				sides = append(sides, sd)
			}
			op := fmt.Sprintf("dequeue, %d per call, %s consumed at the head", rs.n, thousands(level))
			progress("queues: %s", op)
			r, err := runPaired(sides, cfg.writePlan())
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			if rs.n == 1 {
				for _, s := range systems {
					res.dequeue[s.name] = append(res.dequeue[s.name], point{float64(level), r.value(s.name)})
					lo, hi := quartiles(r.times[s.name])
					res.spread[s.name] = append(res.spread[s.name], point{lo, hi})
				}
			}
			if slices.Contains(cfg.TableConsumed, level) {
				res.table.addPaired("", op, "ns/item", r, false)
			}
		}
	}
	return nil
}

// dequeueSide returns a system's side of a dequeue row: chunks of calls
// that dequeue n items each, as many calls as take about cfg.Chunk (at
// least one), but never more than budget items over the rounds rounds of
// the row.
func dequeueSide(cfg config, name string, q queueStore, consumed *int, n, budget, rounds int) (side, error) {
	call := func() error {
		got, err := q.dequeue(n)
		if err == nil && got != n {
			err = fmt.Errorf("dequeue %d after %d consumed: got %d", n, *consumed, got)
		}
		*consumed += got
		return err
	}
	// Three calls to warm up, the last two timed to see how long a call
	// takes: the first call after a setup step can pay once for what the
	// step left (tipkv's first Pop after the consume's Pop(1000)s
	// fragments the memtable's 1,000 range deletions: 0.7-2 ms, against
	// 5-8 µs a call after it). Sizing the chunks by that call made
	// tipkv's chunks 9-40 calls where goque's were 1,000, and a chunk that
	// short measures mostly the process's background work (the CPU clock
	// counts every thread), not the calls.
	const warm, timed = 3, 2
	var c0 int64
	for i := range warm {
		if i == warm-timed {
			c0 = clock()
		}
		if err := call(); err != nil {
			return side{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	perCall := max(time.Duration(clock()-c0)/timed, time.Microsecond)
	calls := int(cfg.Chunk / perCall)
	calls = max(min(calls, (budget-warm*n)/(n*rounds)), 1)
	if verbose {
		progress("    %s: %d calls per chunk (warm-up: %v per call)", name, calls, perCall)
	}
	return side{system: name, chunk: func() (float64, error) {
		return timeChunk(func() (int, error) {
			for c := range calls {
				if err := call(); err != nil {
					return c * n, err
				}
			}
			return calls * n, nil
		}, cfg.ReadQuiet, false)
	}}, nil
}

// churnRows keeps ChurnLive items queued in a queue per system and runs
// ChurnCycles cycles of one enqueue and one dequeue, paired in chunks of
// ChurnChunk cycles, sampling the disk use every ChurnSample cycles.
func churnRows(cfg config, systems []queueSystem, parent string, res *queuesResult) error {
	qs, closeAll, err := openQueues(systems, parent, "churn", func(s queueSystem, dir string) (queueStore, error) { return s.open(dir, true) })
	if err != nil {
		return err
	}
	defer closeAll()
	var sides []side
	for k, s := range systems {
		q, dir := qs[k], filepath.Join(parent, "churn-"+slug(s.name))
		gen := newValueGen(cfg.Seed+11, cfg.ValueSize)
		if err := q.enqueue(gen.next(cfg.ChurnLive)); err != nil {
			return err
		}
		sample := func(c int) error {
			size, err := dirSize(dir)
			res.churn[s.name] = append(res.churn[s.name], point{float64(c), float64(size)})
			return err
		}
		if err := sample(0); err != nil {
			return err
		}
		done := 0
		sides = append(sides, side{system: s.name, chunk: func() (float64, error) {
			n := min(cfg.ChurnChunk, cfg.ChurnCycles-done)
			items := gen.next(n)
			ns, err := timeChunk(func() (int, error) {
				for c := range n {
					if err := q.enqueue(items[c : c+1]); err != nil {
						return c, err
					}
					if got, err := q.dequeue(1); err != nil || got != 1 {
						return c, fmt.Errorf("cycle %d: dequeued %d: %v", done+c+1, got, err)
					}
				}
				return n, nil
			}, cfg.writeQuiet(s.name), false)
			if err != nil {
				return 0, err
			}
			prev := done
			done += n
			if done/cfg.ChurnSample > prev/cfg.ChurnSample || done == cfg.ChurnCycles {
				err = sample(done)
			}
			return ns, err
		}})
	}
	progress("queues: %d churn cycles per system, %d per round", cfg.ChurnCycles, cfg.ChurnChunk)
	r, err := runPaired(sides, fixedPlan((cfg.ChurnCycles+cfg.ChurnChunk-1)/cfg.ChurnChunk))
	if err != nil {
		return err
	}
	t := res.table
	var timed []string // the naive queue's churn finds its head from memory: no cycle time
	for _, s := range systems {
		if s.name != sysNaive {
			timed = append(timed, s.name)
		}
	}
	t.addPaired("", fmt.Sprintf("churn cycle (enqueue 1 + dequeue 1, %s live)", thousands(cfg.ChurnLive)), "ns/op", r.only(timed...), false)
	finalDisk, peakDisk := map[string]float64{}, map[string]float64{}
	for _, s := range systems {
		samples := res.churn[s.name]
		finalDisk[s.name] = samples[len(samples)-1].y
		for _, p := range samples {
			peakDisk[s.name] = max(peakDisk[s.name], p.y)
		}
		progress("queues: %s: %.1f MiB on disk after the churn, at most %.1f", s.name, finalDisk[s.name]/(1<<20), peakDisk[s.name]/(1<<20))
	}
	t.addSingle("", fmt.Sprintf("disk after %s churn cycles", thousands(cfg.ChurnCycles)), "bytes", finalDisk)
	t.addSingle("", "largest disk size during churn", "bytes", peakDisk)
	return nil
}

// thousands prints n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
