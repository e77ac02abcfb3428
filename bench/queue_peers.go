package main

import (
	"encoding/binary"
	"errors"

	"github.com/beeker1121/goque"
	"github.com/cockroachdb/pebble/v2"
)

// goqueQueue is goque's FIFO queue on LevelDB, with goque's own LevelDB
// options (it takes none).
type goqueQueue struct{ q *goque.Queue }

func openGoque(dir string) (*goqueQueue, error) {
	q, err := goque.OpenQueue(dir)
	if err != nil {
		return nil, err
	}
	return &goqueQueue{q: q}, nil
}

func (g *goqueQueue) enqueue(items [][]byte) error {
	for _, it := range items {
		if _, err := g.q.Enqueue(it); err != nil {
			return err
		}
	}
	return nil
}

// dequeue calls Dequeue n times: goque has no batch.
func (g *goqueQueue) dequeue(n int) (int, error) {
	for i := range n {
		it, err := g.q.Dequeue()
		if errors.Is(err, goque.ErrEmpty) {
			return i, nil
		}
		if err != nil {
			return i, err
		}
		if len(it.Value) == 0 {
			return i, errors.New("goque: empty item")
		}
	}
	return n, nil
}

func (g *goqueQueue) consume(n int) error {
	got, err := g.dequeue(n)
	if err == nil && got < n {
		err = errEmpty
	}
	return err
}

func (g *goqueQueue) close() error { return g.q.Close() }

// naiveQueue is the queue a Pebble user writes first: items at
// "q" | bigendian(seq), a dequeue seeks to <queue, 0> for the oldest items
// and point-deletes them. With trackHead it seeks from the head it
// remembers instead (used where only the disk use matters).
type naiveQueue struct {
	db        *pebble.DB
	wo        *pebble.WriteOptions
	tail      uint64 // next sequence number
	head      uint64 // oldest sequence number not yet deleted
	trackHead bool
	lo, hi    []byte
	key       []byte
	sink      []byte
}

func openNaiveQueue(dir string, cfg config, trackHead, synced bool) (*naiveQueue, error) {
	db, err := openPebble(dir, cfg)
	if err != nil {
		return nil, err
	}
	return &naiveQueue{db: db, wo: writeOptions(synced), trackHead: trackHead, hi: []byte{'q' + 1}}, nil
}

func queueKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 'q'), seq)
}

func (n *naiveQueue) enqueue(items [][]byte) error {
	b := n.db.NewBatch()
	defer b.Close()
	for _, it := range items {
		n.key = queueKey(n.key[:0], n.tail)
		n.tail++
		if err := b.Set(n.key, it, nil); err != nil {
			return err
		}
	}
	return b.Commit(n.wo)
}

// dequeue seeks to the oldest item, reads up to count items from there,
// copying each value out, and deletes them in one batch.
func (n *naiveQueue) dequeue(count int) (int, error) {
	from := uint64(0)
	if n.trackHead {
		from = n.head
	}
	n.lo = queueKey(n.lo[:0], from)
	it, err := n.db.NewIter(&pebble.IterOptions{LowerBound: n.lo, UpperBound: n.hi})
	if err != nil {
		return 0, err
	}
	b := n.db.NewBatch()
	defer b.Close()
	got := 0
	for ok := it.SeekGE(n.lo); ok && got < count; ok = it.Next() {
		n.sink = append(n.sink[:0:0], it.Value()...) // the caller gets a copy, as from the others
		n.head = binary.BigEndian.Uint64(it.Key()[1:]) + 1
		if err := b.Delete(it.Key(), nil); err != nil {
			_ = it.Close()
			return 0, err
		}
		got++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, err
	}
	if got == 0 {
		return 0, nil
	}
	return got, b.Commit(n.wo)
}

// consume point-deletes the n oldest items, 1,000 to a batch: the
// tombstones n dequeues would leave, without their seeks.
func (n *naiveQueue) consume(count int) error {
	for count > 0 {
		b := n.db.NewBatch()
		k := min(count, 1000)
		for range k {
			n.key = queueKey(n.key[:0], n.head)
			n.head++
			if err := b.Delete(n.key, nil); err != nil {
				b.Close()
				return err
			}
		}
		count -= k
		if err := b.Commit(pebble.NoSync); err != nil {
			b.Close()
			return err
		}
		b.Close()
	}
	return nil
}

func (n *naiveQueue) close() error { return n.db.Close() }
