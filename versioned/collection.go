package versioned

import (
	"fmt"
	"sync"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
)

// Options configure a Collection. A nil *Options is valid and means the
// defaults.
type Options[T any] struct {
	// Codec encodes and decodes the documents. Every handle of one
	// collection must use the same codec. The default is codec.Msgpack[T].
	Codec codec.Value[T]
}

// Collection is a named set of documents of type T, each a history of
// versions 1, 2, 3, ... that newest-first reads answer with one seek.
//
// A Collection is safe for concurrent use by many goroutines. Handles are
// cheap; any number of them, in any goroutines, may serve the same
// collection of one DB: the version counters they share live in the DB.
//
// Documents are identified by an id of 1 to MaxIDSize bytes, any bytes
// (0x00, 0xFF and invalid UTF-8 included); the Go string only carries them.
type Collection[T any] struct {
	db     *tipkv.DB
	store  storage.Store
	w      *writer
	name   string
	prefix []byte // 01 | name
	codec  codec.Value[T]

	scratch sync.Pool // of *T, to decode point reads into
	puts    sync.Pool // of *putOp[T]
}

// NewCollection returns a handle on the collection called name in db. The
// name is 1 to MaxNameSize bytes, any bytes. Nothing is written until the
// first Put.
func NewCollection[T any](db *tipkv.DB, name string, opts *Options[T]) (*Collection[T], error) {
	if err := checkName("collection", name); err != nil {
		return nil, err
	}
	s, err := link.Store(db)
	if err != nil {
		return nil, err
	}
	w, err := writerOf(db)
	if err != nil {
		return nil, err
	}
	c := &Collection[T]{db: db, store: s, w: w, name: name, prefix: namePrefix(codec.FamilyVersions, name)}
	if opts != nil {
		c.codec = opts.Codec
	}
	if c.codec == nil {
		c.codec = codec.Msgpack[T]{}
	}
	return c, nil
}

// Name returns the collection's name.
func (c *Collection[T]) Name() string { return c.name }

func (c *Collection[T]) docPrefix(dst []byte, id string) []byte {
	return codec.AppendString(append(dst, c.prefix...), id)
}

// Put writes doc as the next version of the document id, 1 for a new
// document, and returns that version. Concurrent Puts of one document get
// dense, unique versions, in the order they commit.
//
// w is the DB, to commit the version at once, or the Batch of a DB.Update,
// to commit it with the rest of the Update. Inside an Update, pass the
// Batch: from its first Put to its end an Update holds the DB's version
// lock, and a write made on the DB inside it waits for that lock forever.
// A version written in an Update that fails is given back: the next Put
// gets it.
func (c *Collection[T]) Put(w tipkv.Writer, id string, doc T) (int64, error) {
	return c.put(w, id, doc, -1)
}

// PutIf is Put on the condition that the document's latest version is
// expected (0: that the document does not exist). Otherwise it writes
// nothing and fails with ErrConflict. Inside an Update the condition counts
// the Update's own earlier writes.
func (c *Collection[T]) PutIf(w tipkv.Writer, id string, doc T, expected int64) (int64, error) {
	if expected < 0 {
		return 0, fmt.Errorf("%w: %s: expected version %d", tipkv.ErrInvalid, c.where(id), expected)
	}
	return c.put(w, id, doc, expected)
}

// putOp is one Put in progress: its encoded key and value, and the write
// it runs in the Tx. putOps are recycled, with run bound once, so a Put
// allocates neither a closure nor a buffer.
type putOp[T any] struct {
	c        *Collection[T]
	buf      []byte // prefix | desc(v) | value
	n        int    // length of the prefix
	id       string
	expected int64 // -1: unconditional
	v        int64 // the version written
	run      func(*storage.Tx) error
}

func (c *Collection[T]) put(w tipkv.Writer, id string, doc T, expected int64) (int64, error) {
	if err := checkID(c.name, id); err != nil {
		return 0, err
	}
	op, ok := c.puts.Get().(*putOp[T])
	if !ok {
		op = &putOp[T]{c: c}
		op.run = op.write
	}
	defer func() {
		if cap(op.buf) <= 64<<10 {
			op.id = ""
			c.puts.Put(op)
		}
	}()
	op.id, op.expected, op.v = id, expected, 0
	op.buf = c.docPrefix(op.buf[:0], id)
	op.n = len(op.buf)
	op.buf = codec.AppendDesc(op.buf, 0) // room for desc(version)
	var err error
	if op.buf, err = c.codec.Append(op.buf, doc); err != nil {
		return 0, fmt.Errorf("%s: %w", c.where(id), err)
	}
	if err := checkValue(op.buf[op.n+codec.NumberSize:]); err != nil {
		return 0, fmt.Errorf("%s: %w", c.where(id), err)
	}
	if err := link.Write(w, op.run); err != nil {
		return 0, err
	}
	return op.v, nil
}

func (op *putOp[T]) write(tx *storage.Tx) error {
	c := op.c
	t, err := c.w.lock(c.db, tx)
	if err != nil {
		return err
	}
	prefix := op.buf[:op.n]
	d := t.doc(prefix)
	latest, err := t.latest(c.store, d, prefix)
	if err != nil {
		return fmt.Errorf("%s: %w", c.where(op.id), err)
	}
	if op.expected >= 0 && latest != op.expected {
		return fmt.Errorf("%w: %s: latest version is %d, expected %d", tipkv.ErrConflict, c.where(op.id), latest, op.expected)
	}
	v := latest + 1
	codec.AppendDesc(prefix, v) // in place, in the room left for it
	key := op.buf[:op.n+codec.NumberSize]
	if err := tx.Batch.Set(key, op.buf[len(key):]); err != nil {
		return err
	}
	d.latest, op.v = v, v
	if v == 1 {
		d.oldest, d.oldestKnown = 1, true
	}
	return nil
}

// Delete drops every version of the document id with one range delete. A
// missing document is not an error. A later Put starts the document again
// at version 1: a deleted document leaves nothing behind.
func (c *Collection[T]) Delete(w tipkv.Writer, id string) error {
	if err := checkID(c.name, id); err != nil {
		return err
	}
	prefix := c.docPrefix(nil, id)
	return link.Write(w, func(tx *storage.Tx) error {
		t, err := c.w.lock(c.db, tx)
		if err != nil {
			return err
		}
		d := t.doc(prefix)
		latest, err := t.latest(c.store, d, prefix)
		if err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		if latest == 0 {
			return nil
		}
		if err := deleteRange(tx, prefix, codec.PrefixEnd(prefix)); err != nil {
			return err
		}
		d.latest, d.oldest, d.oldestKnown = 0, 0, true
		return nil
	})
}

// Prune drops the versions of the document id older than its keepNewest
// newest ones (keepNewest >= 1: the latest version is never dropped), with
// one range delete that starts where the last prune ended, so ranges never
// overlap. It returns how many versions it dropped; a missing document
// drops none.
func (c *Collection[T]) Prune(w tipkv.Writer, id string, keepNewest int) (int64, error) {
	if keepNewest < 1 {
		return 0, fmt.Errorf("%w: %s: Prune must keep at least 1 version, not %d (Delete drops them all)", tipkv.ErrInvalid, c.where(id), keepNewest)
	}
	return c.prune(w, id, func(latest int64) int64 { return latest - int64(keepNewest) })
}

// PruneBefore drops the versions of the document id below v: [1, v). It
// never drops the latest version, even when v is past it. It returns how
// many versions it dropped.
func (c *Collection[T]) PruneBefore(w tipkv.Writer, id string, v int64) (int64, error) {
	if v < 1 {
		return 0, fmt.Errorf("%w: %s: PruneBefore version %d", tipkv.ErrInvalid, c.where(id), v)
	}
	return c.prune(w, id, func(latest int64) int64 { return min(v, latest) - 1 })
}

// prune drops the versions <= cut(latest).
func (c *Collection[T]) prune(w tipkv.Writer, id string, cut func(latest int64) int64) (int64, error) {
	if err := checkID(c.name, id); err != nil {
		return 0, err
	}
	prefix := c.docPrefix(nil, id)
	var dropped int64
	err := link.Write(w, func(tx *storage.Tx) error {
		t, err := c.w.lock(c.db, tx)
		if err != nil {
			return err
		}
		d := t.doc(prefix)
		latest, err := t.latest(c.store, d, prefix)
		if err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		to := cut(latest)
		if latest == 0 || to < 1 {
			return nil
		}
		dropped, err = t.dropThrough(tx, c.store, d, prefix, to)
		if err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return dropped, nil
}

// where names a document in errors.
func (c *Collection[T]) where(id string) string {
	return fmt.Sprintf("collection %q, id %q", c.name, id)
}
