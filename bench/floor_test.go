package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkDequeueFloor pairs a dequeue of one item on tipkv (Pop(1)) and
// on goque with the least a queue on raw Pebble must do for it, to say how
// far "ahead of goque" is from what Pebble allows:
//
//   - pebble-get-delete: a Get of the head the queue tracks in memory and a
//     commit of its Delete (goque's own work, on Pebble);
//   - pebble-get-delete-state: the same commit also writing a state key
//     (head and count), as tipkv's Pop does so that Len stays exact and
//     Open stays a few seeks after a crash.
//
// Every side runs in chunks of cfg.Chunk of CPU time with a rotating order
// and each chunk waits for the quiet its flushes leave (timeChunk), like
// the queue rows of the comparison. It reports each system's time per
// dequeue over goque's, the geometric mean of the rounds' ratios and its
// 95% interval. It measures once, whatever b.N:
//
//	go test -run '^$' -bench DequeueFloor -benchtime 1x -count 3
func BenchmarkDequeueFloor(b *testing.B) {
	cfg := fullConfig()
	const items = 600_000
	dir := b.TempDir()
	gen := newValueGen(cfg.Seed+7, cfg.ValueSize)
	values := gen.next(1000)

	tq, err := openTipkvQueue(filepath.Join(dir, "tipkv"), cfg, false)
	if err != nil {
		b.Fatal(err)
	}
	defer tq.close()
	gq, err := openGoque(filepath.Join(dir, "goque"))
	if err != nil {
		b.Fatal(err)
	}
	defer gq.close()
	plain, err := openFloorQueue(filepath.Join(dir, "floor"), cfg, false)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.close()
	state, err := openFloorQueue(filepath.Join(dir, "floor-state"), cfg, true)
	if err != nil {
		b.Fatal(err)
	}
	defer state.close()

	type system struct {
		name string
		q    queueStore
	}
	systems := []system{{sysTipkv, tq}, {sysGoque, gq}, {"pebble-get-delete", plain}, {"pebble-get-delete-state", state}}
	for _, s := range systems {
		for n := 0; n < items; n += len(values) {
			if err := s.q.enqueue(values); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
		}
	}
	settleDown(cfg.Quiet)

	var sides []side
	for _, s := range systems {
		pos := 0
		one := func(int) error {
			got, err := s.q.dequeue(1)
			if err == nil && got != 1 {
				err = fmt.Errorf("dequeue: got %d", got)
			}
			return err
		}
		sides = append(sides, side{system: s.name, chunk: func() (float64, error) {
			return timeChunk(forDuration(one, &pos, cfg.Chunk), cfg.WriteQuiet, false)
		}})
	}
	p := plan{minRounds: 16, maxRounds: 48, maxTime: time.Minute, target: 0.03}
	b.ResetTimer()
	res, err := runPaired(sides, p)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	for _, s := range systems {
		if s.name == sysGoque {
			continue
		}
		e := ratioOver(res.times[s.name], res.times[sysGoque])
		b.ReportMetric(e.ratio, slug(s.name)+"/goque")
		b.ReportMetric(e.lo, slug(s.name)+"/goque-lo")
		b.ReportMetric(e.hi, slug(s.name)+"/goque-hi")
	}
	for _, s := range systems {
		b.ReportMetric(res.value(s.name), slug(s.name)+"-ns/item")
	}
	b.ReportMetric(float64(res.rounds), "rounds")
}

// ratioOver is the geometric mean of a[i]/b[i] over the paired rounds, with
// its 95% interval.
func ratioOver(a, b []float64) estimate {
	n := min(len(a), len(b))
	logs := make([]float64, 0, n)
	for i := range n {
		logs = append(logs, math.Log(max(a[i], 1e-3)/max(b[i], 1e-3)))
	}
	return logInterval(logs)
}

// floorQueue is the least a FIFO queue on raw Pebble does: items at
// "q" | bigendian(seq); a dequeue Gets the head it tracks in memory, copies
// the value out and commits its Delete, with a Set of a state key (head,
// tail and count, 3 uvarints) in the same batch when withState is set.
type floorQueue struct {
	db         *pebble.DB
	head, tail uint64
	withState  bool
	key, st    []byte
	sink       []byte
}

func openFloorQueue(dir string, cfg config, withState bool) (*floorQueue, error) {
	db, err := openPebble(dir, cfg)
	if err != nil {
		return nil, err
	}
	return &floorQueue{db: db, withState: withState}, nil
}

func (f *floorQueue) enqueue(items [][]byte) error {
	b := f.db.NewBatch()
	defer b.Close()
	for _, it := range items {
		f.key = queueKey(f.key[:0], f.tail)
		f.tail++
		if err := b.Set(f.key, it, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

var floorStateKey = []byte{'s'}

func (f *floorQueue) dequeue(n int) (int, error) {
	for i := range n {
		if f.head == f.tail {
			return i, nil
		}
		f.key = queueKey(f.key[:0], f.head)
		v, closer, err := f.db.Get(f.key)
		if err != nil {
			return i, err
		}
		f.sink = append(f.sink[:0:0], v...) // the caller gets a copy, as from the others
		if err := closer.Close(); err != nil {
			return i, err
		}
		if len(f.sink) == 0 {
			return i, errors.New("floor: empty item")
		}
		b := f.db.NewBatch()
		err = b.Delete(f.key, nil)
		f.head++
		if err == nil && f.withState {
			f.st = binary.AppendUvarint(f.st[:0], f.head)
			f.st = binary.AppendUvarint(f.st, f.tail)
			f.st = binary.AppendUvarint(f.st, f.tail-f.head)
			err = b.Set(floorStateKey, f.st, nil)
		}
		if err == nil {
			err = b.Commit(pebble.NoSync)
		}
		_ = b.Close()
		if err != nil {
			return i, err
		}
	}
	return n, nil
}

func (f *floorQueue) consume(n int) error {
	_, err := f.dequeue(n)
	return err
}

func (f *floorQueue) close() error { return f.db.Close() }
