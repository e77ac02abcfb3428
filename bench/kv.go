package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// The kv section pairs tipkv's versioned.Collection with NATS JetStream's
// key-value store (file storage, in-process server): both keep a latest
// value per key with a bounded history of older ones, and both can be
// watched. The same work on both sides:
//
//   - put: one new version of a random key in a commit of its own (Put
//     on the DB; kv.Put, which waits for the server's ack).
//   - get latest: Collection.Latest; kv.Get.
//   - get a revision: Collection.Get(id, v), the exact version v (v random
//     in 1..KVVersions); kv.GetRevision with that version's revision.
//     JetStream revisions are stream sequences, one sequence for the whole
//     bucket, so the run remembers each version's revision; tipkv numbers
//     versions per document. (Collection.AsOf, which finds the greatest
//     version at or below v, is in the versions section.)
//   - history: every version of a key, values included: Collection.History
//     with no limit, newest first; kv.History, oldest first (it runs an
//     ordered consumer over the key's subject).
//   - watch: one watcher on one key, and a writer that puts a version and
//     waits until the watcher has it before the next (Collection.Watch
//     from the latest version; kv.Watch with UpdatesOnly). The time is the
//     put, the wake-up and the delivery together.
//   - load: tipkv Puts in one Update per LoadBatch versions; JetStream
//     async publishes to the key's subject, LoadBatch in flight, then
//     waits for their acks (a KV put is a publish to $KV.<bucket>.<key>).
//
// What is not the same: JetStream keeps at most 64 versions per key (its
// History setting is a uint8 capped at 64), so the bucket is made with
// History 64 and tipkv's collection with KeepVersions 64, and the long
// keys hold exactly 64 versions. JetStream's file store syncs every two
// minutes by default and tipkv runs with NoSync here, so neither syncs a
// commit. NATS serves every request through its in-process connection
// (client, server and their goroutines in this process); the CPU clock
// counts both sides.

// A kvStore is one system of the kv section. Every check is the store's:
// it knows which of its own identifiers (tipkv's versions, JetStream's
// revisions) belong to which version.
type kvStore interface {
	// load writes whole keys: every version of each, ascending.
	load(recs []record) error
	// latest reads id's latest value and checks that it is version want.
	latest(id string, want int64) error
	// revision reads exactly version v of id.
	revision(id string, v int64) error
	// history reads every version of id and checks there are n.
	history(id string, n int64) error
	// put writes the next version of id in a commit of its own and returns
	// the store's identifier of it, which grows with every put of id.
	put(id string, value []byte) (uint64, error)
	// watch starts a watcher of id that sends the identifier of every
	// version written after the call, until ctx ends.
	watch(ctx context.Context, id string) (<-chan uint64, error)
	close() error
}

type kvResult struct {
	table *table
}

func runKV(cfg config, parent string) (*kvResult, error) {
	kc := cfg
	kc.Docs, kc.Versions, kc.LongDocs, kc.LongVersions = cfg.KVKeys, cfg.KVVersions, cfg.KVLongKeys, kvHistory
	kc.HotDocs, kc.HotLong = min(cfg.HotDocs, cfg.KVKeys), min(cfg.HotLong, cfg.KVLongKeys)
	openers := []struct {
		name string
		open func(dir string) (kvStore, error)
	}{
		{sysTipkv, func(dir string) (kvStore, error) { return openTipkvKV(dir, cfg) }},
		{sysNATS, func(dir string) (kvStore, error) { return openNATSKV(dir, cfg) }},
	}
	data := newVersionData(kc, len(openers))
	t := &table{title: fmt.Sprintf("Latest value with history: %s keys x %d versions (+ %s x %d), %d-byte values, against NATS JetStream KV",
		thousands(kc.Docs), kc.Versions, thousands(kc.LongDocs), kc.LongVersions, cfg.ValueSize)}
	type opened struct {
		name  string
		store kvStore
		seqs  *versionSeqs
	}
	var stores []opened
	defer func() {
		for _, o := range stores {
			_ = o.store.close()
		}
	}()
	for k, o := range openers {
		t.systems = append(t.systems, o.name)
		s, err := o.open(filepath.Join(parent, "kv-"+slug(o.name)))
		if err != nil {
			return nil, fmt.Errorf("%s: open: %w", o.name, err)
		}
		stores = append(stores, opened{o.name, s, data.seqs[k]})
	}

	batches := data.batches(kc)
	per := kc.loadPer(len(batches))
	var sides []side
	for _, o := range stores {
		sides = append(sides, loadSide(kc, o.name, batches, per, batchSpec.records, o.store.load))
	}
	progress("kv: loading %d batches into each store, %d per round", len(batches), per)
	load, err := runPaired(sides, fixedPlan((len(batches)+per-1)/per))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	settleDown(cfg.Quiet)

	nv, nl := int64(kc.Versions), int64(kc.LongVersions)
	type readOp struct {
		op   string
		long bool
		run  func(s kvStore, q *versionSeqs, id string, i int) error
	}
	ops := []readOp{
		{"get latest", false, func(s kvStore, _ *versionSeqs, id string, _ int) error { return s.latest(id, nv) }},
		{"get a revision", false, func(s kvStore, q *versionSeqs, id string, i int) error { return s.revision(id, q.asOf[i%seqLen]) }},
		{fmt.Sprintf("history (%d versions)", nv), false, func(s kvStore, _ *versionSeqs, id string, _ int) error { return s.history(id, nv) }},
		{fmt.Sprintf("history (%d versions)", nl), true, func(s kvStore, _ *versionSeqs, id string, _ int) error { return s.history(id, nl) }},
	}
	for _, group := range []string{"hot", "uniform"} {
		for _, op := range ops {
			sides = nil
			for _, o := range stores {
				s, q := o.store, o.seqs
				seq, names, warm := q.uniDocs, data.docs, min(1000, kc.Docs)
				switch {
				case op.long && group == "hot":
					seq, names, warm = q.hotLongs, data.longs, kc.HotLong
				case op.long:
					seq, names, warm = q.uniLongs, data.longs, min(100, kc.LongDocs)
				case group == "hot":
					seq, warm = q.hotDocs, kc.HotDocs
				}
				read := func(i int) error { return op.run(s, q, names[seq[i%len(seq)]], i) }
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
			progress("kv: %s, %s", op.op, group)
			res, err := runPaired(sides, cfg.plan())
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", op.op, group, err)
			}
			t.addPaired(group, op.op, "ns/op", res, false)
		}
	}
	t.addPaired("", fmt.Sprintf("load (batches of %s versions)", thousands(cfg.LoadBatch)), "ns/item", load, false)

	sides = nil
	for k, o := range stores {
		sides = append(sides, kvPutSide(cfg, o.name, o.store, data.docs, o.seqs.puts, uint64(k)))
	}
	progress("kv: put, 1 per commit")
	put, err := runPaired(sides, cfg.writePlan())
	if err != nil {
		return nil, fmt.Errorf("put: %w", err)
	}
	t.addPaired("", "put, 1 version per commit (random keys)", "ns/op", put, false)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sides = nil
	for k, o := range stores {
		sd, err := kvWatchSide(ctx, cfg, o.name, o.store, uint64(k))
		if err != nil {
			return nil, fmt.Errorf("watch: %s: %w", o.name, err)
		}
		sides = append(sides, sd)
	}
	progress("kv: watch")
	watch, err := runPaired(sides, cfg.writePlan())
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	t.addPaired("", "watch: put 1 version, wait until the watcher has it", "ns/op", watch, false)

	t.notes = append(t.notes, fmt.Sprintf(
		"NATS JetStream KV: nats-server's JetStream run in this process with file storage (no listener), nats.go connected in-process; the bucket keeps %d versions per key (History, JetStream's most), "+
			"tipkv's collection as many (KeepVersions). get a revision: tipkv Get(id, v), JetStream GetRevision with v's revision. history: every version, values copied. "+
			"watch: put one version and wait for the watcher to deliver it before the next; the time is the writer's and the watcher's together. "+
			"hot: %s keys (%d of the %d-version ones) per system, read once first; uniform: all keys. %s",
		kvHistory, thousands(kc.HotDocs), kc.HotLong, kvHistory, cfg.method()))
	return &kvResult{table: t}, nil
}

// kvHistory is the versions each key keeps and the long keys hold:
// JetStream KV's most.
const kvHistory = 64

// kvPutSide returns a system's side of the put row: each chunk puts
// PutChunk new versions, one per commit, to the keys of seq, and checks
// that each got an identifier above the key's last.
func kvPutSide(cfg config, name string, s kvStore, keys []string, seq []int, seed uint64) side {
	gen := newValueGen(cfg.Seed+3000+seed, cfg.ValueSize)
	last := map[int]uint64{}
	pos := 0
	return side{system: name, chunk: func() (float64, error) {
		vals := gen.next(cfg.PutChunk)
		return timeChunk(func() (int, error) {
			for i := range cfg.PutChunk {
				d := seq[pos%len(seq)]
				pos++
				id, err := s.put(keys[d], vals[i])
				if err := check(err, id > last[d], "put %s: %d after %d", keys[d], id, last[d]); err != nil {
					return i, err
				}
				last[d] = id
			}
			return cfg.PutChunk, nil
		}, cfg.writeQuiet(name), false)
	}}
}

// kvWatchSide starts a watcher of a key of its own and returns the system's
// side of the watch row: each chunk puts WatchChunk versions of the key,
// each after the watcher delivered the one before.
func kvWatchSide(ctx context.Context, cfg config, name string, s kvStore, seed uint64) (side, error) {
	const key = "watched"
	ch, err := s.watch(ctx, key)
	if err != nil {
		return side{}, err
	}
	gen := newValueGen(cfg.Seed+4000+seed, cfg.ValueSize)
	return side{system: name, chunk: func() (float64, error) {
		vals := gen.next(cfg.WatchChunk)
		return timeChunk(func() (int, error) {
			for i := range cfg.WatchChunk {
				id, err := s.put(key, vals[i])
				if err != nil {
					return i, err
				}
				if err := awaitDelivery(ch, id); err != nil {
					return i, err
				}
			}
			return cfg.WatchChunk, nil
		}, cfg.writeQuiet(name), false)
	}}, nil
}

// awaitDelivery waits until ch delivers id, for at most a minute.
func awaitDelivery(ch <-chan uint64, id uint64) error {
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				return fmt.Errorf("watcher ended before delivering %d", id)
			}
			if got == id {
				return nil
			}
			if got > id {
				return fmt.Errorf("watcher delivered %d, skipping %d", got, id)
			}
		case <-timeout.C:
			return fmt.Errorf("watcher did not deliver %d within a minute", id)
		}
	}
}
