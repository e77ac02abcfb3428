package main

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// The rewind section pairs tipkv's whole collection as of a time
// (versioned.Collection.LatestAllAsOf) with Badger's read at a timestamp in
// managed mode, where a version's commit timestamp is its write time: the
// peer a user would reach for to ask "every document as it stood at t"
// (issue 26). Each system also walks its own latest of every document, so
// a row says both what the rewind costs beside the peer's and beside the
// system's own walk of the present.

// rewindPage is how many documents, from the first, a walk reads.
const rewindPage = 10_000

type rewindResult struct {
	table *table
}

// rewindStore is one system's documents, each written at t0 and every
// tenth again at t0 + 2h.
type rewindStore interface {
	// walk reads the first n documents as they stood at t (their latest
	// versions with t zero), values included, and returns how many it
	// read.
	walk(t time.Time, n int) (int, error)
	close() error
}

func runRewind(cfg config, parent string) (*rewindResult, error) {
	page := min(rewindPage, cfg.Docs)
	t := &table{title: fmt.Sprintf("The whole collection as of a time: %s documents, %d-byte values, walks of the first %s",
		thousands(cfg.Docs), cfg.ValueSize, thousands(page)),
		systems: []string{sysTipkv, sysBadger}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rewrite := t0.Add(2 * time.Hour)
	value := newValueGen(cfg.Seed+50, cfg.ValueSize).next(1)[0]

	tk, err := openTipkvRewind(filepath.Join(parent, "rewind-tipkv"), cfg)
	if err != nil {
		return nil, fmt.Errorf("tipkv: %w", err)
	}
	defer tk.close()
	bg, err := openBadgerRewind(filepath.Join(parent, "rewind-badger"), cfg)
	if err != nil {
		return nil, fmt.Errorf("badger: %w", err)
	}
	defer bg.close()
	progress("rewind: loading %s documents into each system", thousands(cfg.Docs))
	for _, step := range []struct {
		at    time.Time
		every int
	}{{t0, 1}, {rewrite, 10}} {
		if err := tk.load(cfg, step.at, step.every, value); err != nil {
			return nil, fmt.Errorf("tipkv: %w", err)
		}
		if err := bg.load(cfg, step.at, step.every, value); err != nil {
			return nil, fmt.Errorf("badger: %w", err)
		}
	}
	if err := tk.settle(); err != nil {
		return nil, fmt.Errorf("tipkv: %w", err)
	}
	if err := bg.settle(); err != nil {
		return nil, fmt.Errorf("badger: %w", err)
	}

	const (
		tipkvNow    = "tipkv latest"
		badgerNow   = "Badger latest"
		tipkvRewind = "tipkv as of"
		badgerAt    = "Badger at ts"
	)
	var own []string // each system's rewind over its own walk of the latest
	for i, at := range []struct {
		name string
		t    time.Time
	}{
		{"as of a time after every version", rewrite.Add(time.Hour)},
		{"as of a time before the rewrites (a tenth of the documents answer with version 1)", t0.Add(time.Hour)},
	} {
		walkSide := func(name string, s rewindStore, when time.Time) side {
			return side{system: name, chunk: func() (float64, error) {
				pos := 0
				return timeChunk(forDuration(func(int) error {
					n, err := s.walk(when, page)
					if err == nil && n != page {
						err = fmt.Errorf("read %d documents, want %d", n, page)
					}
					return err
				}, &pos, cfg.Chunk), cfg.ReadQuiet, false)
			}}
		}
		sides := []side{
			walkSide(tipkvRewind, tk, at.t), walkSide(badgerAt, bg, at.t),
			walkSide(tipkvNow, tk, time.Time{}), walkSide(badgerNow, bg, time.Time{}),
		}
		progress("rewind: %s", at.name)
		res, err := runPaired(sides, cfg.plan())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at.name, err)
		}
		t.addPaired("", "walk "+at.name, "ns/walk", res.pair(tipkvRewind, badgerAt, sysTipkv, sysBadger), false)
		if i == 0 {
			t.addPaired("", "walk of the latest versions", "ns/walk", res.pair(tipkvNow, badgerNow, sysTipkv, sysBadger), false)
		}
		own = append(own, fmt.Sprintf("Walk %s, over the same system's walk of the latest in the same rounds: tipkv %s, Badger %s.",
			at.name, res.pair(tipkvRewind, tipkvNow, "", "").ratio(tipkvNow), res.pair(badgerAt, badgerNow, "", "").ratio(badgerNow)))
	}
	t.notes = append(t.notes,
		"tipkv: versioned.Collection[[]byte] (codec.Raw), the DB's Clock set to each load's time, so a version's commit time is its write time; "+
			"a walk is LatestAllAsOf(t, Query{Limit: n}) (one seek per document through one snapshot, stepping to an older version on the walk's own iterator) "+
			"or LatestAll(Query{Limit: n}). Badger v4 in managed mode (OpenManaged, conflict detection off): "+
			"a version's commit timestamp is its write time in Unix ns; a walk is one read transaction at that timestamp (math.MaxUint64 for the latest) "+
			"and one prefix iterator, copying each value (ValueCopy). Both stores compacted before reading (tipkv Flush + Compact; Badger closed, reopened and flattened).",
		"Issue 26's target for tipkv's rewind over its own LatestAll: at most 1.3x.")
	t.notes = append(t.notes, own...)
	t.notes = append(t.notes, cfg.method())
	return &rewindResult{table: t}, nil
}

// tipkvRewind is a collection whose DB's clock the load sets.
type tipkvRewind struct {
	db  *tipkv.DB
	c   *versioned.Collection[[]byte]
	now time.Time
}

func openTipkvRewind(dir string, cfg config) (*tipkvRewind, error) {
	r := &tipkvRewind{}
	opts := tipkvOptions(cfg, false)
	opts.Clock = func() time.Time { return r.now }
	db, err := tipkv.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	r.db, r.c = db, c
	return r, nil
}

// load writes every every-th document at the time at, in batches of
// cfg.LoadBatch.
func (r *tipkvRewind) load(cfg config, at time.Time, every int, value []byte) error {
	r.now = at
	for i := 0; i < cfg.Docs; i += cfg.LoadBatch * every {
		err := r.db.Update(func(b *tipkv.Batch) error {
			for j := i; j < min(i+cfg.LoadBatch*every, cfg.Docs); j += every {
				if _, err := r.c.Put(b, docID(j), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *tipkvRewind) settle() error {
	if err := r.db.Flush(); err != nil {
		return err
	}
	return r.db.Compact()
}

func (r *tipkvRewind) walk(t time.Time, n int) (int, error) {
	q := tipkv.Query{Limit: n}
	seq := r.c.LatestAll(q)
	if !t.IsZero() {
		seq = r.c.LatestAllAsOf(t, q)
	}
	k := 0
	for d, err := range seq {
		if err != nil {
			return k, err
		}
		if d.Version < 1 {
			return k, fmt.Errorf("document %s without a version", d.ID)
		}
		k++
	}
	return k, nil
}

func (r *tipkvRewind) close() error { return r.db.Close() }

// badgerRewind keeps each document as one key whose versions are commit
// timestamps in Unix ns, in a managed-mode DB opened, settled and closed
// as badgerVersions' is.
type badgerRewind struct {
	*badgerVersions
}

func openBadgerRewind(dir string, cfg config) (*badgerRewind, error) {
	b, err := openBadgerVersions(dir, cfg, false)
	if err != nil {
		return nil, err
	}
	return &badgerRewind{b}, nil
}

func (b *badgerRewind) load(cfg config, at time.Time, every int, value []byte) error {
	ts := uint64(at.UnixNano())
	for i := 0; i < cfg.Docs; i += cfg.LoadBatch * every {
		wb := b.db.NewManagedWriteBatch()
		for j := i; j < min(i+cfg.LoadBatch*every, cfg.Docs); j += every {
			if err := wb.SetEntryAt(badger.NewEntry(badgerKey(nil, "r/", docID(j)), value), ts); err != nil {
				wb.Cancel()
				return err
			}
		}
		if err := wb.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func (b *badgerRewind) walk(t time.Time, n int) (int, error) {
	ts := uint64(math.MaxUint64)
	if !t.IsZero() {
		ts = uint64(t.UnixNano())
	}
	txn := b.db.NewTransactionAt(ts, false)
	defer txn.Discard()
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte("r/")
	opts.PrefetchValues = false // values are inline (under ValueThreshold)
	it := txn.NewIterator(opts)
	defer it.Close()
	k := 0
	for it.Rewind(); it.Valid() && k < n; it.Next() {
		var err error
		if b.sink, err = it.Item().ValueCopy(b.sink[:0]); err != nil {
			return k, err
		}
		k++
	}
	return k, nil
}
