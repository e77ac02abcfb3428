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

func runFeeds(cfg config, parent string) (*feedsResult, error) {
	streams := make([]string, cfg.Streams)
	for i := range streams {
		streams[i] = streamName(i)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 3))
	hot := hotSequence(rng, cfg.Streams, cfg.HotStreams)
	uni := uniformSequence(rng, cfg.Streams)
	starts := make([]int, seqLen) // first event of each range read
	for i := range starts {
		starts[i] = rng.IntN(cfg.Events - cfg.RangeEvents + 1)
	}
	space := cfg.EventSpacing.Nanoseconds()
	at := func(e int) int64 { return feedEpoch + int64(e)*space }

	t := &table{title: fmt.Sprintf("Event feeds: %s streams x %d events, %d-byte values", thousands(cfg.Streams), cfg.Events, cfg.ValueSize)}
	type opened struct {
		name string
		s    feedStore
	}
	var stores []opened
	defer func() {
		for _, o := range stores {
			_ = o.s.close()
		}
	}()
	loadNs := map[string]float64{}
	for _, sys := range []struct {
		name string
		open func(dir string) (feedStore, error)
	}{
		{sysTipkv, func(dir string) (feedStore, error) { return openTipkvFeed(dir, cfg) }},
		{sysBadger, func(dir string) (feedStore, error) { return openBadgerFeed(dir, cfg) }},
	} {
		t.systems = append(t.systems, sys.name)
		dir := filepath.Join(parent, "feed-"+slug(sys.name))
		s, err := sys.open(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sys.name, err)
		}
		stores = append(stores, opened{sys.name, s})
		progress("feeds: loading %s", sys.name)
		gen := newValueGen(cfg.Seed+5, cfg.ValueSize)
		c0 := clock()
		var evs []event
		for _, st := range streams {
			vals := gen.next(cfg.Events)
			for e := range cfg.Events {
				evs = append(evs, event{stream: st, at: at(e), value: vals[e]})
			}
			if len(evs) >= 10_000 {
				if err := s.append(evs); err != nil {
					return nil, fmt.Errorf("%s: %w", sys.name, err)
				}
				evs = evs[:0]
			}
		}
		if err := s.append(evs); err != nil {
			return nil, fmt.Errorf("%s: %w", sys.name, err)
		}
		loadNs[sys.name] = elapsed(c0, cfg.Streams*cfg.Events)
		if err := s.settle(); err != nil {
			return nil, fmt.Errorf("%s: settle: %w", sys.name, err)
		}
		settleDown(cfg.Quiet)
	}

	last := at(cfg.Events - 1)
	newest := func(n int) func(s feedStore, stream string, i int) error {
		return func(s feedStore, stream string, _ int) error {
			got, oldest, err := s.newest(stream, n)
			want := min(n, cfg.Events)
			return check(err, got == want && oldest == last-int64(want-1)*space, "newest %d of %s: %d events down to %d", n, stream, got, oldest)
		}
	}
	ops := []struct {
		op  string
		run func(s feedStore, stream string, i int) error
	}{
		{"newest 10", newest(10)},
		{"newest 100", newest(100)},
		{fmt.Sprintf("time range (%d events)", cfg.RangeEvents), func(s feedStore, stream string, i int) error {
			a := starts[i%seqLen]
			got, oldest, err := s.between(stream, at(a), at(a+cfg.RangeEvents))
			return check(err, got == cfg.RangeEvents && oldest == at(a), "range from event %d of %s: %d events down to %d", a, stream, got, oldest)
		}},
	}
	for _, group := range []string{"hot", "uniform"} {
		for _, op := range ops {
			seq, warm := uni, 1000
			if group == "hot" {
				seq, warm = hot, cfg.HotStreams
			}
			var cs []*contender
			for _, o := range stores {
				s := o.s
				cs = append(cs, &contender{system: o.name, op: func(i int) error {
					return op.run(s, streams[seq[i%len(seq)]], i)
				}})
			}
			progress("feeds: %s, %s", op.op, group)
			r, err := measure(cs, warm, cfg.Rounds, cfg.Cell)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", op.op, group, err)
			}
			t.add(group, op.op, "ns/op", r)
		}
	}
	t.add("", "load (batches of 10,000 events)", "ns/item", loadNs)
	t.notes = append(t.notes, fmt.Sprintf(
		"hot: %d streams, warmed first; uniform: all streams. Each cell is the median of %d interleaved runs of %s. "+
			"Badger keys are stream | bigendian(time), read with a reverse prefix iterator from stream | max; "+
			"tipkv uses Feed.Newest and Feed.Between with codec.Raw.", cfg.HotStreams, cfg.Rounds, cfg.Cell))
	return &feedsResult{table: t}, nil
}
