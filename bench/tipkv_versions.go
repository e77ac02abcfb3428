package main

import (
	"errors"
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// tipkvOptions gives tipkv the run's cache and memtable budget. Writes are
// not synced unless synced is set, as in every peer here (goque and Badger
// do not sync by default; raw Pebble is given NoSync). tipkv's own default
// is to sync.
func tipkvOptions(cfg config, synced bool) *tipkv.Options {
	return &tipkv.Options{NoSync: !synced, CacheSize: cfg.CacheSize, MemTableSize: uint64(cfg.MemTableSize)}
}

// tipkvVersions is a versioned.Collection of raw-byte documents.
type tipkvVersions struct {
	db   *tipkv.DB
	c    *versioned.Collection[[]byte]
	sink []byte
}

func openTipkvVersions(dir string, cfg config, synced bool) (*tipkvVersions, error) {
	db, err := tipkv.Open(dir, tipkvOptions(cfg, synced))
	if err != nil {
		return nil, err
	}
	c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}, MissFilter: cfg.MissFilter})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &tipkvVersions{db: db, c: c}, nil
}

func (t *tipkvVersions) put(recs []record) error {
	return t.db.Update(func(b *tipkv.Batch) error {
		for _, r := range recs {
			v, err := t.c.Put(b, r.id, r.value)
			if err != nil {
				return err
			}
			if v != r.version {
				return fmt.Errorf("put %s: got version %d, want %d", r.id, v, r.version)
			}
		}
		return nil
	})
}

// putNext is Put in a commit of its own (the DB as the Writer).
func (t *tipkvVersions) putNext(id string, value []byte) (int64, error) {
	return t.c.Put(t.db, id, value)
}

func (t *tipkvVersions) settle() error {
	if err := t.db.Flush(); err != nil {
		return err
	}
	return t.db.Compact()
}

func (t *tipkvVersions) found(d versioned.Doc[[]byte], err error) (int64, error) {
	if errors.Is(err, tipkv.ErrNotFound) {
		return 0, errMissing
	}
	if err != nil {
		return 0, err
	}
	t.sink = d.Value
	return d.Version, nil
}

func (t *tipkvVersions) latest(id string) (int64, error) { return t.found(t.c.Latest(id)) }

func (t *tipkvVersions) asOf(id string, v int64) (int64, error) { return t.found(t.c.AsOf(id, v)) }

func (t *tipkvVersions) newest(id string, n int) (int, int64, error) {
	count, oldest := 0, int64(0)
	for d, err := range t.c.History(id, tipkv.Query{Limit: n}) {
		if err != nil {
			return 0, 0, err
		}
		t.sink = d.Value
		oldest = d.Version
		count++
	}
	return count, oldest, nil
}

func (t *tipkvVersions) close() error { return t.db.Close() }
