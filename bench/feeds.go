package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"
)

// A feedStore keeps streams of timestamped events and reads them newest
// first.
type feedStore interface {
	// append writes events, each at its time, in one write.
	append(evs []event) error
	settle() error
	// newest reads the n newest events of stream and returns how many it
	// read and the time of the last (oldest) one.
	newest(stream string, n int) (int, int64, error)
	// between reads the events of stream in [from, to), newest first,
	// and returns how many it read and the time of the last one.
	between(stream string, from, to int64) (int, int64, error)
	close() error
}

type event struct {
	stream string
	at     int64 // Unix nanoseconds
	value  []byte
}

type feedsResult struct{ table *table }

// feedEpoch is the time of every stream's first event.
var feedEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func streamName(i int) string { return fmt.Sprintf("stream-%06d", i) }

// feedSeqs are one system's random read sequences.
type feedSeqs struct {
	hot, uni []int
	starts   []int // first event of each range read
}

func newFeedSeqs(cfg config, k int) *feedSeqs {
	rng := rand.New(rand.NewPCG(cfg.Seed, 300+uint64(k)))
	s := &feedSeqs{hot: hotSequence(rng, cfg.Streams, cfg.HotStreams), uni: uniformSequence(rng, cfg.Streams), starts: make([]int, seqLen)}
	for i := range s.starts {
		s.starts[i] = rng.IntN(cfg.Events - cfg.RangeEvents + 1)
	}
	return s
}

// A streamBatch is one write batch of the feed load: every event of
// streams.
type streamBatch struct{ streams []string }

func runFeeds(cfg config, parent string) (*feedsResult, error) {
	streams := make([]string, cfg.Streams)
	for i := range streams {
		streams[i] = streamName(i)
	}
	space := cfg.EventSpacing.Nanoseconds()
	at := func(e int) int64 { return feedEpoch + int64(e)*space }

	t := &table{title: fmt.Sprintf("Event feeds: %s streams x %d events, %d-byte values", thousands(cfg.Streams), cfg.Events, cfg.ValueSize)}
	type opened struct {
		name string
		s    feedStore
		seqs *feedSeqs
	}
	var stores []opened
	defer func() {
		for _, o := range stores {
			_ = o.s.close()
		}
	}()
	for k, sys := range []struct {
		name string
		open func(dir string) (feedStore, error)
	}{
		{sysTipkv, func(dir string) (feedStore, error) { return openTipkvFeed(dir, cfg) }},
		{sysBadger, func(dir string) (feedStore, error) { return openBadgerFeed(dir, cfg) }},
	} {
		t.systems = append(t.systems, sys.name)
		s, err := sys.open(filepath.Join(parent, "feed-"+slug(sys.name)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sys.name, err)
		}
		stores = append(stores, opened{sys.name, s, newFeedSeqs(cfg, k)})
	}

	// The load, paired as the versions' load is.
	per := max(cfg.LoadBatch/cfg.Events, 1)
	var batches []streamBatch
	for lo := 0; lo < len(streams); lo += per {
		batches = append(batches, streamBatch{streams[lo:min(lo+per, len(streams))]})
	}
	records := func(b streamBatch, gen *valueGen) []record {
		vals := gen.next(len(b.streams) * cfg.Events)
		out := make([]record, 0, len(vals))
		for _, st := range b.streams {
			for e := range cfg.Events {
				out = append(out, record{id: st, version: at(e), value: vals[len(out)]})
			}
		}
		return out
	}
	perChunk := cfg.loadPer(len(batches))
	var sides []side
	for _, o := range stores {
		s := o.s
		sides = append(sides, loadSide(cfg, o.name, batches, perChunk, records, func(recs []record) error {
			evs := make([]event, len(recs))
			for i, r := range recs {
				evs[i] = event{stream: r.id, at: r.version, value: r.value}
			}
			return s.append(evs)
		}))
	}
	progress("feeds: loading %d batches into each store, %d per round", len(batches), perChunk)
	load, err := runPaired(sides, fixedPlan((len(batches)+perChunk-1)/perChunk))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	for _, o := range stores {
		if err := o.s.settle(); err != nil {
			return nil, fmt.Errorf("%s: settle: %w", o.name, err)
		}
		settleDown(cfg.Quiet)
	}

	last := at(cfg.Events - 1)
	newest := func(n int) func(s feedStore, _ *feedSeqs, stream string, i int) error {
		return func(s feedStore, _ *feedSeqs, stream string, _ int) error {
			got, oldest, err := s.newest(stream, n)
			want := min(n, cfg.Events)
			return check(err, got == want && oldest == last-int64(want-1)*space, "newest %d of %s: %d events down to %d", n, stream, got, oldest)
		}
	}
	ops := []struct {
		op  string
		run func(s feedStore, q *feedSeqs, stream string, i int) error
	}{
		{"newest 10", newest(10)},
		{"newest 100", newest(100)},
		{fmt.Sprintf("time range (%d events)", cfg.RangeEvents), func(s feedStore, q *feedSeqs, stream string, i int) error {
			a := q.starts[i%seqLen]
			got, oldest, err := s.between(stream, at(a), at(a+cfg.RangeEvents))
			return check(err, got == cfg.RangeEvents && oldest == at(a), "range from event %d of %s: %d events down to %d", a, stream, got, oldest)
		}},
	}
	for _, group := range []string{"hot", "uniform"} {
		for _, op := range ops {
			var sides []side
			for _, o := range stores {
				s, q := o.s, o.seqs
				seq, warm := q.uni, 1000
				if group == "hot" {
					seq, warm = q.hot, cfg.HotStreams
				}
				read := func(i int) error { return op.run(s, q, streams[seq[i%len(seq)]], i) }
				pos := 0
				for range warm {
					if err := read(pos); err != nil {
						return nil, fmt.Errorf("%s, %s: %s: %w", op.op, group, o.name, err)
					}
					pos++
				}
				sides = append(sides, side{system: o.name, chunk: func() (float64, error) {
					return timeChunk(forDuration(read, &pos, cfg.Chunk), cfg.ReadQuiet, false)
				}})
			}
			progress("feeds: %s, %s", op.op, group)
			r, err := runPaired(sides, cfg.plan())
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", op.op, group, err)
			}
			t.addPaired(group, op.op, "ns/op", r, false)
		}
	}
	t.addPaired("", fmt.Sprintf("load (batches of %s events)", thousands(per*cfg.Events)), "ns/item", load, false)
	t.notes = append(t.notes, fmt.Sprintf(
		"hot: %d streams per system, read once first; uniform: all streams; every system reads its own random sequence. "+
			"Badger keys are stream | bigendian(time), read with a reverse prefix iterator from stream | max; "+
			"tipkv uses Feed.Newest and Feed.Between with codec.Raw. %s", cfg.HotStreams, cfg.method()))
	return &feedsResult{table: t}, nil
}
