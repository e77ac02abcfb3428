package main

import (
	"errors"
	"math"

	badger "github.com/dgraph-io/badger/v4"
)

// badgerOptions are Badger's defaults with the run's block cache budget,
// no log output, and every version kept. Badger keeps table indexes and
// bloom filters in memory outside the block cache by default
// (IndexCacheSize 0); that is left as it is. synced sets SyncWrites, which
// syncs the write-ahead log (and value log) on every commit; Badger's
// default is not to.
func badgerOptions(dir string, cfg config, synced bool) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(nil).
		WithBlockCacheSize(cfg.CacheSize).
		WithNumVersionsToKeep(math.MaxInt32).
		WithSyncWrites(synced)
}

// badgerVersions stores each version of a document as a Badger version of
// one key, in managed mode: the document version is the commit timestamp.
// Latest is txn.Get at the greatest read timestamp, as-of is txn.Get at
// the version, newest N walks the key's versions with a key iterator.
type badgerVersions struct {
	db   *badger.DB
	opts badger.Options
	key  []byte
	sink []byte
}

// Conflict detection is off: in managed mode Badger never trims its list
// of committed transactions (the trim runs only in its unmanaged mode), so
// with detection on every read-write commit walks every earlier one. A
// writer of versions keeps them dense by other means, as tipkv does with
// a lock per collection.
func openBadgerVersions(dir string, cfg config, synced bool) (*badgerVersions, error) {
	opts := badgerOptions(dir, cfg, synced).WithDetectConflicts(false)
	db, err := badger.OpenManaged(opts)
	if err != nil {
		return nil, err
	}
	return &badgerVersions{db: db, opts: opts}, nil
}

func badgerKey(dst []byte, prefix, id string) []byte {
	return append(append(dst, prefix...), id...)
}

func (b *badgerVersions) put(recs []record) error {
	wb := b.db.NewManagedWriteBatch()
	defer wb.Cancel()
	for _, r := range recs {
		e := badger.NewEntry(badgerKey(nil, "v/", r.id), r.value)
		if err := wb.SetEntryAt(e, uint64(r.version)); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// settle closes and reopens the DB, which writes the memtables out as
// level-0 tables (Badger has no flush call), then flattens the tree.
func (b *badgerVersions) settle() error {
	if err := b.db.Close(); err != nil {
		return err
	}
	db, err := badger.OpenManaged(b.opts)
	if err != nil {
		return err
	}
	b.db = db
	return db.Flatten(2)
}

func (b *badgerVersions) get(id string, readTs uint64) (int64, error) {
	txn := b.db.NewTransactionAt(readTs, false)
	defer txn.Discard()
	b.key = badgerKey(b.key[:0], "v/", id)
	item, err := txn.Get(b.key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, errMissing
	}
	if err != nil {
		return 0, err
	}
	if b.sink, err = item.ValueCopy(nil); err != nil {
		return 0, err
	}
	return int64(item.Version()), nil
}

func (b *badgerVersions) latest(id string) (int64, error) { return b.get(id, math.MaxUint64) }

func (b *badgerVersions) asOf(id string, v int64) (int64, error) { return b.get(id, uint64(v)) }

func (b *badgerVersions) newest(id string, n int) (int, int64, error) {
	txn := b.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	b.key = badgerKey(b.key[:0], "v/", id)
	opts := badger.DefaultIteratorOptions
	opts.AllVersions = true
	opts.PrefetchValues = false // values are inline (under ValueThreshold): no value log reads to overlap
	it := txn.NewKeyIterator(b.key, opts)
	defer it.Close()
	count, oldest := 0, int64(0)
	for it.Rewind(); it.Valid() && count < n; it.Next() {
		item := it.Item()
		var err error
		if b.sink, err = item.ValueCopy(nil); err != nil {
			return 0, 0, err
		}
		oldest = int64(item.Version())
		count++
	}
	return count, oldest, nil
}

// putNext reads the key's latest version and writes the next one in the
// same transaction, committed at that version.
func (b *badgerVersions) putNext(id string, value []byte) (int64, error) {
	txn := b.db.NewTransactionAt(math.MaxUint64, true)
	defer txn.Discard()
	key := badgerKey(nil, "v/", id) // Badger keeps the key until the commit
	var v uint64
	item, err := txn.Get(key)
	switch {
	case err == nil:
		v = item.Version()
	case !errors.Is(err, badger.ErrKeyNotFound):
		return 0, err
	}
	if err := txn.SetEntry(badger.NewEntry(key, value)); err != nil {
		return 0, err
	}
	return int64(v + 1), txn.CommitAt(v+1, nil)
}

func (b *badgerVersions) close() error { return b.db.Close() }
