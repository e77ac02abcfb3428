package main

import (
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// onceWindow is the scope of every new key the unique rows write: held an
// hour after its write (the queue package's own paired benchmarks use the
// same), so no key ends while a row runs.
var onceWindow = tipkv.Window(time.Hour)

// tipkvUnique is tipkv's side of the unique rows: one DB holding a queue
// written with Enqueue, a queue written with EnqueueOnce, and a collection
// of one hot document, the baseline of issue 27's duplicate target.
type tipkvUnique struct {
	db    *tipkv.DB
	plain *queue.Queue[[]byte]
	once  *queue.Queue[[]byte]
	docs  *versioned.Collection[[]byte]
	// The first sequence numbers of the duplicates' keys, as the first
	// EnqueueOnce of each returned them.
	dupWindow, dupDone int64
}

const (
	tipkvDupWindow = "dup-window"
	tipkvDupDone   = "dup-until-done"
	tipkvHotDoc    = "hot"
)

// openTipkvUnique opens the DB and writes what the duplicate row reads: a
// key of each scope and the hot document, each from value.
func openTipkvUnique(dir string, cfg config, synced bool, value []byte) (*tipkvUnique, error) {
	db, err := tipkv.Open(dir, tipkvOptions(cfg, synced))
	if err != nil {
		return nil, err
	}
	t := &tipkvUnique{db: db}
	opts := &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1}
	if t.plain, err = queue.Open(db, "plain", opts); err == nil {
		t.once, err = queue.Open(db, "once", opts)
	}
	if err == nil {
		t.docs, err = versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	}
	if err == nil {
		t.dupWindow, _, err = t.once.EnqueueOnce(db, tipkvDupWindow, onceWindow, value)
	}
	if err == nil {
		t.dupDone, _, err = t.once.EnqueueOnce(db, tipkvDupDone, tipkv.UntilDone(), value)
	}
	if err == nil {
		_, err = t.docs.Put(db, tipkvHotDoc, value)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return t, nil
}

// enqueue is one Enqueue of items, one Update.
func (t *tipkvUnique) enqueue(items [][]byte) error {
	_, err := t.plain.Enqueue(t.db, items...)
	return err
}

// enqueueOnce enqueues items[i] under keys[i], each key new, in one
// Update.
func (t *tipkvUnique) enqueueOnce(keys []string, items [][]byte) error {
	if len(items) == 1 {
		return t.checkNew(t.once.EnqueueOnce(t.db, keys[0], onceWindow, items[0]))
	}
	return t.db.Update(func(b *tipkv.Batch) error {
		for i, it := range items {
			if err := t.checkNew(t.once.EnqueueOnce(b, keys[i], onceWindow, it)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *tipkvUnique) checkNew(_ int64, dup bool, err error) error {
	if err == nil && dup {
		err = fmt.Errorf("tipkv: a new key found a duplicate")
	}
	return err
}

// duplicate calls EnqueueOnce with the existing key of scope's kind and
// checks that it found the first message.
func (t *tipkvUnique) duplicate(untilDone bool, value []byte) error {
	key, scope, want := tipkvDupWindow, onceWindow, t.dupWindow
	if untilDone {
		key, scope, want = tipkvDupDone, tipkv.UntilDone(), t.dupDone
	}
	seq, dup, err := t.once.EnqueueOnce(t.db, key, scope, value)
	if err == nil && (!dup || seq != want) {
		err = fmt.Errorf("tipkv: duplicate of %q: dup %v, seq %d, want %d", key, dup, seq, want)
	}
	return err
}

// latest reads the hot document.
func (t *tipkvUnique) latest() error {
	d, err := t.docs.Latest(tipkvHotDoc)
	if err == nil && (d.Version != 1 || len(d.Value) == 0) {
		err = fmt.Errorf("tipkv: latest of %q: version %d, %d bytes", tipkvHotDoc, d.Version, len(d.Value))
	}
	return err
}

func (t *tipkvUnique) close() error { return t.db.Close() }
