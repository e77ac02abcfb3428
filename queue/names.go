package queue

import (
	"fmt"
	"iter"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// Names iterates over the names of the queues in db, in byte order, each
// once: every queue that holds messages or dead letters, or has a state
// key because messages were consumed from it (so an emptied queue is
// listed, with its sequence numbers to go on from). A queue that was
// opened but never written to is not in the store and not listed.
//
// It reads the store, not memory: one seek per queue in each of the three
// queue key families (items, state, dead letters), never a walk over a
// queue's messages. Queues created or emptied while it runs may or may not
// appear. An error (a key whose name does not decode matches
// tipkv.ErrCorrupt and names the key) is yielded once, as the last pair.
func Names(db *tipkv.DB) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		ln, err := link.Of(db)
		if err != nil {
			yield("", fmt.Errorf("queue names: %w", err))
			return
		}
		var cs []*nameCursor
		defer func() {
			for _, c := range cs {
				_ = c.it.Close()
			}
		}()
		for _, f := range []codec.Family{codec.FamilyQueueItems, codec.FamilyQueueState, codec.FamilyDeadLetters} {
			lo := codec.AppendFamily(nil, f)
			// A skip-scan: every seek wants one key.
			it, err := engine.NewIterN(ln.Store, lo, codec.PrefixEnd(lo), 1)
			if err != nil {
				yield("", fmt.Errorf("queue names: %w", err))
				return
			}
			c := &nameCursor{it: it}
			cs = append(cs, c)
			if err := c.load(it.First()); err != nil {
				yield("", fmt.Errorf("queue names: %w", err))
				return
			}
		}
		for {
			// The least name under any cursor is next; then every cursor
			// on it skips past it, with one seek.
			var name []byte
			for _, c := range cs {
				if c.ok && (name == nil || string(c.name) < string(name)) {
					name = c.name
				}
			}
			if name == nil {
				return
			}
			s := string(name)
			if !yield(s, nil) {
				return
			}
			for _, c := range cs {
				if c.ok && string(c.name) == s {
					if err := c.load(c.it.SeekGE(codec.PrefixEnd(c.prefix))); err != nil {
						yield("", fmt.Errorf("queue names: %w", err))
						return
					}
				}
			}
		}
	}
}

// nameCursor is a skip-scan over one queue family: it stands on the first
// key of one queue.
type nameCursor struct {
	it     engine.Iter
	ok     bool
	name   []byte // the queue's name
	prefix []byte // family | encoded name: every key of the queue starts with it
}

// load reads the queue at the iterator's position, after a positioning
// call that returned ok.
func (c *nameCursor) load(ok bool) error {
	c.ok = ok
	if !ok {
		return c.it.Error()
	}
	key := c.it.Key()
	name, rest, err := codec.DecodeBytes(key[1:])
	if err != nil {
		return fmt.Errorf("key %x: %w", key, err)
	}
	c.name = name
	c.prefix = append(c.prefix[:0], key[:len(key)-len(rest)]...)
	return nil
}
