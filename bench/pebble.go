package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// openPebble opens a raw Pebble store as a user would set one up next to
// tipkv: Pebble's default comparer, the same cache and memtable budget and
// format as tipkv, bloom filters on every level.
func openPebble(dir string, cfg config) (*pebble.DB, error) {
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       uint64(cfg.MemTableSize),
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	return pebble.Open(dir, opts)
}

// compactPebble flushes the memtables and compacts the whole key space.
func compactPebble(db *pebble.DB) error {
	if err := db.Flush(); err != nil {
		return err
	}
	return db.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true)
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(format string, args ...any) { log.Printf("pebble: "+format, args...) }
func (quietLogger) Fatalf(format string, args ...any) { log.Fatalf("pebble: "+format, args...) }

// pebbleVersions is the layout a Pebble user writes without tipkv:
// "v/" | id | bigendian(version), versions ascending, the newest found by
// reverse iteration from the end of the document's range.
type pebbleVersions struct {
	db       *pebble.DB
	lo, hi   []byte // scratch bounds
	key      []byte // scratch key
	wo       *pebble.WriteOptions
	readSink []byte

	lastHits, lastMisses int64
}

func openPebbleVersions(dir string, cfg config, synced bool) (*pebbleVersions, error) {
	db, err := openPebble(dir, cfg)
	if err != nil {
		return nil, err
	}
	return &pebbleVersions{db: db, wo: writeOptions(synced)}, nil
}

// writeOptions is pebble.Sync when synced, else pebble.NoSync.
func writeOptions(synced bool) *pebble.WriteOptions {
	if synced {
		return pebble.Sync
	}
	return pebble.NoSync
}

func appendVersionKey(dst []byte, id string, v int64) []byte {
	dst = append(append(dst, "v/"...), id...)
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

func (p *pebbleVersions) put(recs []record) error {
	b := p.db.NewBatch()
	defer b.Close()
	for _, r := range recs {
		p.key = appendVersionKey(p.key[:0], r.id, r.version)
		if err := b.Set(p.key, r.value, nil); err != nil {
			return err
		}
	}
	return b.Commit(p.wo)
}

func (p *pebbleVersions) settle() error { return compactPebble(p.db) }

// iter opens an iterator bounded to the document's versions:
// ["v/" id, "v/" id 0xff).
func (p *pebbleVersions) iter(id string) (*pebble.Iterator, error) {
	p.lo = append(append(p.lo[:0], "v/"...), id...)
	p.hi = append(append(p.hi[:0], p.lo...), 0xff)
	return p.db.NewIter(&pebble.IterOptions{LowerBound: p.lo, UpperBound: p.hi})
}

func (p *pebbleVersions) versionOf(it *pebble.Iterator) int64 {
	k := it.Key()
	p.readSink = append(p.readSink[:0:0], it.Value()...) // the caller gets a copy, as from the others
	return int64(binary.BigEndian.Uint64(k[len(k)-8:]))
}

func (p *pebbleVersions) latest(id string) (int64, error) {
	it, err := p.iter(id)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, errOr(it.Error(), errMissing)
	}
	return p.versionOf(it), nil
}

func (p *pebbleVersions) asOf(id string, v int64) (int64, error) {
	it, err := p.iter(id)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	p.key = appendVersionKey(p.key[:0], id, v+1)
	if !it.SeekLT(p.key) {
		return 0, errOr(it.Error(), errMissing)
	}
	return p.versionOf(it), nil
}

func (p *pebbleVersions) newest(id string, n int) (int, int64, error) {
	it, err := p.iter(id)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	count, oldest := 0, int64(0)
	for ok := it.Last(); ok && count < n; ok = it.Prev() {
		oldest = p.versionOf(it)
		count++
	}
	return count, oldest, it.Error()
}

// putNext finds the document's latest version with Last on its range (the
// key only, no value copied) and sets the next one.
func (p *pebbleVersions) putNext(id string, value []byte) (int64, error) {
	it, err := p.iter(id)
	if err != nil {
		return 0, err
	}
	var v int64
	if it.Last() {
		k := it.Key()
		v = int64(binary.BigEndian.Uint64(k[len(k)-8:]))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, err
	}
	p.key = appendVersionKey(p.key[:0], id, v+1)
	return v + 1, p.db.Set(p.key, value, p.wo)
}

func (p *pebbleVersions) close() error { return p.db.Close() }

// cacheStats reports the block cache's hits and misses since the last
// call, and the shape of the LSM tree, for the progress log.
func (p *pebbleVersions) cacheStats() string {
	m := p.db.Metrics()
	hits, misses := m.BlockCache.Hits-p.lastHits, m.BlockCache.Misses-p.lastMisses
	p.lastHits, p.lastMisses = m.BlockCache.Hits, m.BlockCache.Misses
	files := ""
	for l := range m.Levels {
		if n := m.Levels[l].TablesCount; n > 0 {
			files += fmt.Sprintf(" L%d:%d", l, n)
		}
	}
	return fmt.Sprintf("block cache hit rate %.1f%% of %d, %d MiB cached; tables%s",
		100*float64(hits)/float64(max(hits+misses, 1)), hits+misses, m.BlockCache.Size>>20, files)
}

// errOr returns err if it is not nil, else fallback.
func errOr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
