package main

import (
	"encoding/binary"

	badger "github.com/dgraph-io/badger/v4"
)

// badgerFeed keeps events at "f/" | stream | bigendian(time) in a normal
// (not managed) Badger DB and reads them newest first the way Badger's
// docs do it: a reverse iterator over the stream's prefix, seeked to the
// stream's end (or to the end of a time range).
type badgerFeed struct {
	db     *badger.DB
	opts   badger.Options
	prefix []byte
	key    []byte
	sink   []byte
}

func openBadgerFeed(dir string, cfg config) (*badgerFeed, error) {
	opts := badgerOptions(dir, cfg, false).WithNumVersionsToKeep(1)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, err
	}
	return &badgerFeed{db: db, opts: opts}, nil
}

func feedKey(dst []byte, stream string, at int64) []byte {
	return binary.BigEndian.AppendUint64(badgerKey(dst, "f/", stream), uint64(at))
}

func (b *badgerFeed) append(evs []event) error {
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range evs {
		if err := wb.Set(feedKey(nil, e.stream, e.at), e.value); err != nil {
			return err
		}
	}
	return wb.Flush()
}

func (b *badgerFeed) settle() error {
	if err := b.db.Close(); err != nil {
		return err
	}
	db, err := badger.Open(b.opts)
	if err != nil {
		return err
	}
	b.db = db
	return db.Flatten(2)
}

// scan reads stream newest first from just below the time end, down to
// the time from, at most n events.
func (b *badgerFeed) scan(stream string, from, end int64, n int) (int, int64, error) {
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	b.prefix = badgerKey(b.prefix[:0], "f/", stream)
	opts := badger.DefaultIteratorOptions
	opts.Reverse = true
	opts.Prefix = b.prefix
	opts.PrefetchValues = false // values are inline (under ValueThreshold): no value log reads to overlap
	it := txn.NewIterator(opts)
	defer it.Close()
	b.key = feedKey(b.key[:0], stream, end-1)
	count, oldest := 0, int64(0)
	for it.Seek(b.key); it.Valid() && count < n; it.Next() {
		item := it.Item()
		k := item.Key()
		at := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
		if at < from {
			break
		}
		var err error
		if b.sink, err = item.ValueCopy(nil); err != nil {
			return 0, 0, err
		}
		oldest = at
		count++
	}
	return count, oldest, nil
}

func (b *badgerFeed) newest(stream string, n int) (int, int64, error) {
	return b.scan(stream, 0, 1<<63-1, n)
}

func (b *badgerFeed) between(stream string, from, to int64) (int, int64, error) {
	return b.scan(stream, from, to, 1<<30)
}

func (b *badgerFeed) close() error { return b.db.Close() }
