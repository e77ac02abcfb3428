package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestQuick runs the whole command at tiny sizes: every system, every
// measurement, the tables and the charts.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two to five stores per section")
	}
	cfg := quickConfig()
	cfg.Chunk, cfg.MinRounds, cfg.MaxRounds = time.Millisecond, 2, 2
	cfg.Out, cfg.Tmp = t.TempDir(), t.TempDir()
	var out bytes.Buffer
	if err := run(cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Document versions", "## Queues", "## Latest value with history", "## Event feeds", "| latest, hot |",
		"| dequeue, 1 per call, 0 consumed at the head |", "tipkv / naive Pebble", "tipkv / dque", "tipkv / bigqueue", "tipkv / NATS KV",
		"| watch: put 1 version, wait until the watcher has it |", "synced",
		"## Unique inserts", "tipkv / River", "| insert once (a new key), 100 per commit |", "| insert once, a duplicate key, synced (wall time) |",
		"## Queues on PostgreSQL", "tipkv / River riverbench", "| insert, 100 per transaction (wall time) |",
		"| burn-down of 2,000 jobs, 32 workers, tipkv a handle per worker (wall time) |",
		"| commit to a worker holding the job, one at a time, p99 (wall time) |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, name := range []string{"read-cost.png", "dequeue-vs-consumed.png", "disk-over-churn.png", "feed-read-cost.png",
		"ratios-versions.png", "ratios-queues.png", "ratios-feeds.png", "kv-read-cost.png", "ratios-kv.png",
		"ratios-riverpg.png", "riverpg-latency.png"} {
		fi, err := os.Stat(filepath.Join(cfg.Out, name))
		if err != nil || fi.Size() == 0 {
			t.Errorf("chart %s: %v", name, err)
		}
	}
}

// The benchmarks below run one read of the versions section per system
// over a small data set, for profiling:
//
//	go test -run - -bench 'Versions/op=missing' -cpuprofile cpu.out
var (
	benchOnce   sync.Once
	benchStores map[string]versionStore
	benchData   *versionData
	benchErr    error
)

func benchVersionStores(b *testing.B) (map[string]versionStore, *versionData) {
	benchOnce.Do(func() {
		cfg := quickConfig()
		cfg.Docs, cfg.HotDocs = 50_000, 5_000
		dir, err := os.MkdirTemp("", "tipkv-bench-test-")
		if err != nil {
			benchErr = err
			return
		}
		benchData = newVersionData(cfg, 1)
		benchStores = map[string]versionStore{}
		for name, open := range map[string]func(string) (versionStore, error){
			sysTipkv:  func(d string) (versionStore, error) { return openTipkvVersions(d, cfg, false) },
			sysBadger: func(d string) (versionStore, error) { return openBadgerVersions(d, cfg, false) },
			sysPebble: func(d string) (versionStore, error) { return openPebbleVersions(d, cfg, false) },
		} {
			s, err := open(filepath.Join(dir, slug(name)))
			gen := newValueGen(cfg.Seed, cfg.ValueSize)
			for _, b := range benchData.batches(cfg) {
				if err == nil {
					err = s.put(b.records(gen))
				}
			}
			if err == nil {
				err = s.settle()
			}
			if err != nil {
				benchErr = fmt.Errorf("%s: %w", name, err)
				return
			}
			benchStores[name] = s
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchStores, benchData
}

func BenchmarkVersions(b *testing.B) {
	stores, data := benchVersionStores(b)
	seq := data.seqs[0] // the same reads for every system: these runs are for profiling, one system at a time
	ops := map[string]func(s versionStore, i int) error{
		"latest": func(s versionStore, i int) error {
			_, err := s.latest(data.docs[seq.hotDocs[i%seqLen]])
			return err
		},
		"asof": func(s versionStore, i int) error {
			_, err := s.asOf(data.docs[seq.hotDocs[i%seqLen]], seq.asOf[i%seqLen])
			return err
		},
		"newest10": func(s versionStore, i int) error {
			_, _, err := s.newest(data.docs[seq.hotDocs[i%seqLen]], 10)
			return err
		},
		"newest100": func(s versionStore, i int) error {
			_, _, err := s.newest(data.longs[seq.hotLongs[i%seqLen]], 100)
			return err
		},
		"missing": func(s versionStore, i int) error {
			_, err := s.latest(data.docs[seq.hotDocs[i%seqLen]] + "~")
			if err == errMissing {
				return nil
			}
			return fmt.Errorf("missing: %v", err)
		},
	}
	for _, op := range []string{"latest", "asof", "newest10", "newest100", "missing"} {
		for _, sys := range []string{sysTipkv, sysBadger, sysPebble} {
			b.Run(fmt.Sprintf("op=%s/system=%s", op, slug(sys)), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := ops[op](stores[sys], i); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkQueueCycle is one enqueue and one dequeue with 1,000 items
// queued, per system, for profiling the churn test.
func BenchmarkQueueCycle(b *testing.B) {
	cfg := quickConfig()
	for _, s := range queueSystems(cfg) {
		b.Run("system="+slug(s.name), func(b *testing.B) {
			q, err := s.open(b.TempDir(), true)
			if err != nil {
				b.Fatal(err)
			}
			defer q.close()
			gen := newValueGen(1, cfg.ValueSize)
			if err := q.enqueue(gen.next(1000)); err != nil {
				b.Fatal(err)
			}
			items := gen.next(1024)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := q.enqueue(items[i%1024 : i%1024+1]); err != nil {
					b.Fatal(err)
				}
				if n, err := q.dequeue(1); err != nil || n != 1 {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// BenchmarkQueueEnqueue is one enqueue of 100 items, per system.
func BenchmarkQueueEnqueue(b *testing.B) {
	cfg := quickConfig()
	for _, s := range queueSystems(cfg) {
		b.Run("system="+slug(s.name), func(b *testing.B) {
			q, err := s.open(b.TempDir(), false)
			if err != nil {
				b.Fatal(err)
			}
			defer q.close()
			items := newValueGen(1, cfg.ValueSize).next(100)
			b.ReportAllocs()
			for b.Loop() {
				if err := q.enqueue(items); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
