package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// errEmpty is what a queueStore's dequeue returns when nothing is queued.
var errEmpty = errors.New("queue empty")

// A queueStore is a FIFO queue of byte values on disk, dequeued at most
// once (the item is removed as it is returned).
type queueStore interface {
	// enqueue appends items, in one write where the system has batches.
	enqueue(items [][]byte) error
	// dequeue removes and returns the oldest item.
	dequeue() ([]byte, error)
	// consume removes the n oldest items for a test's setup, leaving on
	// disk what n dequeues would leave, only faster.
	consume(n int) error
	close() error
}

type point struct{ x, y float64 }

type queuesResult struct {
	table    *table
	systems  []string
	dequeue  map[string][]point // consumed items -> ns per dequeue
	churn    map[string][]point // cycles -> bytes on disk
	cycles   int
	consumed []int
}

type queueSystem struct {
	name string
	// open opens a new queue in dir; churn is true for the churn test.
	open func(dir string, churn bool) (queueStore, error)
}

func queueSystems(cfg config) []queueSystem {
	return []queueSystem{
		{sysTipkv, func(dir string, _ bool) (queueStore, error) { return openTipkvQueue(dir, cfg) }},
		{sysGoque, func(dir string, _ bool) (queueStore, error) { return openGoque(dir) }},
		{sysNaive, func(dir string, churn bool) (queueStore, error) { return openNaiveQueue(dir, cfg, churn) }},
	}
}

func runQueues(cfg config, parent string) (*queuesResult, error) {
	res := &queuesResult{
		table:    &table{title: fmt.Sprintf("Queues: %d-byte items", cfg.ValueSize)},
		dequeue:  map[string][]point{},
		churn:    map[string][]point{},
		cycles:   cfg.ChurnCycles,
		consumed: cfg.Consumed,
	}
	enq := map[string]float64{}
	deq := map[int]map[string]float64{}
	cycle := map[string]float64{}
	finalDisk := map[string]float64{}
	peakDisk := map[string]float64{}
	for _, s := range queueSystems(cfg) {
		res.systems = append(res.systems, s.name)
		res.table.systems = append(res.table.systems, s.name)
		ns, points, err := dequeueRun(cfg, s, filepath.Join(parent, "queue-"+slug(s.name)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		enq[s.name] = ns
		for _, p := range points {
			if deq[int(p.x)] == nil {
				deq[int(p.x)] = map[string]float64{}
			}
			deq[int(p.x)][s.name] = p.y
		}
		res.dequeue[s.name] = points

		perCycle, samples, err := churnRun(cfg, s, filepath.Join(parent, "churn-"+slug(s.name)))
		if err != nil {
			return nil, fmt.Errorf("%s: churn: %w", s.name, err)
		}
		res.churn[s.name] = samples
		if s.name != sysNaive {
			cycle[s.name] = perCycle
		}
		finalDisk[s.name] = samples[len(samples)-1].y
		for _, p := range samples {
			peakDisk[s.name] = max(peakDisk[s.name], p.y)
		}
	}
	t := res.table
	t.add("", fmt.Sprintf("enqueue, batches of %d", cfg.EnqueueBatch), "ns/item", enq)
	for _, c := range cfg.TableConsumed {
		t.add("", fmt.Sprintf("dequeue, %s consumed at the head", thousands(c)), "ns/op", deq[c])
	}
	t.add("", fmt.Sprintf("churn cycle (enqueue 1 + dequeue 1, %s live)", thousands(cfg.ChurnLive)), "ns/op", cycle)
	t.add("", fmt.Sprintf("disk after %s churn cycles", thousands(cfg.ChurnCycles)), "bytes", finalDisk)
	t.add("", "largest disk size during churn", "bytes", peakDisk)
	t.notes = append(t.notes,
		"tipkv dequeues with Pop (at most once, like goque's Dequeue); the naive queue seeks to <queue, 0> and deletes with point deletes. "+
			fmt.Sprintf("A dequeue row is the median of up to 5 chunks of %d dequeues each (at most %s in all), after that many items were consumed. ", max(cfg.DequeueOps/5, 1), cfg.DequeueTime)+
			"goque has no batch enqueue: its batches are that many Enqueue calls. "+
			"In the churn test the naive queue finds its head from memory (same writes, same disk use; the seek cost is the dequeue rows), so it has no churn-cycle time. "+
			"Writes are not synced in any system.")
	return res, nil
}

// dequeueRun enqueues every item the dequeue measurements need (timing
// it), then for each consumed level removes items up to that level and
// times dequeues from there.
func dequeueRun(cfg config, s queueSystem, dir string) (float64, []point, error) {
	q, err := s.open(dir, false)
	if err != nil {
		return 0, nil, err
	}
	defer q.close()
	last := cfg.Consumed[len(cfg.Consumed)-1]
	total := last + cfg.DequeueOps*len(cfg.Consumed) + cfg.EnqueueBatch
	total = (total + cfg.EnqueueBatch - 1) / cfg.EnqueueBatch * cfg.EnqueueBatch
	gen := newValueGen(cfg.Seed+7, cfg.ValueSize)
	progress("queues: %s: enqueueing %d items", s.name, total)
	var busy int64
	for n := 0; n < total; n += cfg.EnqueueBatch {
		items := gen.next(cfg.EnqueueBatch)
		c0 := clock()
		if err := q.enqueue(items); err != nil {
			return 0, nil, err
		}
		busy += clock() - c0
	}
	enqNs := float64(busy) / float64(total)
	settleDown(cfg.Quiet)

	var points []point
	consumed := 0
	for _, level := range cfg.Consumed {
		if level > consumed {
			if err := q.consume(level - consumed); err != nil {
				return 0, nil, err
			}
			consumed = level
			settleDown(cfg.Quiet)
		}
		// Five chunks of dequeues, each timed on its own; the median chunk
		// keeps a flush or a garbage collection that lands in one of them
		// out of the figure.
		chunk := max(cfg.DequeueOps/5, 1)
		t0 := time.Now()
		var chunks []float64
		n := 0
		for len(chunks) < 5 && (len(chunks) == 0 || time.Since(t0) < cfg.DequeueTime) {
			c0, k := clock(), 0
			for k < chunk && (k < 3 || time.Since(t0) < cfg.DequeueTime) {
				if _, err := q.dequeue(); err != nil {
					return 0, nil, fmt.Errorf("dequeue after %d: %w", consumed, err)
				}
				k++
			}
			chunks = append(chunks, elapsed(c0, k))
			n += k
		}
		ns := median(chunks)
		progress("queues: %s: dequeue after %d consumed: %.1f µs (%d dequeues, %d chunks)", s.name, level, ns/1e3, n, len(chunks))
		points = append(points, point{float64(level), ns})
		consumed += n
	}
	return enqNs, points, nil
}

// churnRun keeps ChurnLive items queued and runs ChurnCycles cycles of one
// enqueue and one dequeue, sampling the disk use.
func churnRun(cfg config, s queueSystem, dir string) (float64, []point, error) {
	q, err := s.open(dir, true)
	if err != nil {
		return 0, nil, err
	}
	defer q.close()
	gen := newValueGen(cfg.Seed+11, cfg.ValueSize)
	if err := q.enqueue(gen.next(cfg.ChurnLive)); err != nil {
		return 0, nil, err
	}
	sample := func(c int) (point, error) {
		size, err := dirSize(dir)
		return point{float64(c), float64(size)}, err
	}
	p, err := sample(0)
	if err != nil {
		return 0, nil, err
	}
	samples := []point{p}
	progress("queues: %s: %d churn cycles", s.name, cfg.ChurnCycles)
	var busy int64
	batch := gen.next(cfg.ChurnSample)
	c0 := clock()
	for c := 1; c <= cfg.ChurnCycles; c++ {
		k := (c - 1) % cfg.ChurnSample
		if err := q.enqueue(batch[k : k+1]); err != nil {
			return 0, nil, err
		}
		if _, err := q.dequeue(); err != nil {
			return 0, nil, fmt.Errorf("cycle %d: %w", c, err)
		}
		if c%cfg.ChurnSample == 0 || c == cfg.ChurnCycles {
			busy += clock() - c0
			p, err := sample(c)
			if err != nil {
				return 0, nil, err
			}
			samples = append(samples, p)
			batch = gen.next(cfg.ChurnSample)
			c0 = clock()
		}
	}
	ns := float64(busy) / float64(cfg.ChurnCycles)
	progress("queues: %s: %.1f µs per cycle, %.1f MiB on disk at the end", s.name, ns/1e3, samples[len(samples)-1].y/(1<<20))
	return ns, samples, nil
}

// thousands prints n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
