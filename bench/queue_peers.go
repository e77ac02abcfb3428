package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/beeker1121/goque"
	"github.com/cockroachdb/pebble/v2"
	"github.com/grandecola/bigqueue"
	"github.com/joncrlsn/dque"
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

// dqueItem is what dque stores: it gob-encodes one Go value per item, so
// the bytes go in a struct (its builder must return a pointer to one).
type dqueItem struct{ V []byte }

// dqueItemsPerSegment is how many items one dque segment file holds.
// dque keeps its first and last segments in memory; 1,000 100-byte items
// is about 100 KB a segment (its README's example uses 50).
const dqueItemsPerSegment = 1000

// dqueQueue is dque's FIFO queue: segment files of gob-encoded items, an
// item appended per Enqueue and a 4-byte removal record per Dequeue. In
// turbo mode it leaves syncing to the OS, like every unsynced row here;
// synced, each enqueue call ends with TurboSync, one fsync per commit (its
// default, turbo off, fsyncs every Enqueue and every Dequeue).
type dqueQueue struct {
	q      *dque.DQue
	synced bool
}

func openDque(dir string, synced bool) (*dqueQueue, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { // dque makes only its queue's own directory, dir/q
		return nil, err
	}
	q, err := dque.New("q", dir, dqueItemsPerSegment, func() any { return &dqueItem{} })
	if err != nil {
		return nil, err
	}
	if err := q.TurboOn(); err != nil {
		_ = q.Close()
		return nil, err
	}
	return &dqueQueue{q: q, synced: synced}, nil
}

func (d *dqueQueue) enqueue(items [][]byte) error {
	for _, it := range items {
		if err := d.q.Enqueue(&dqueItem{V: it}); err != nil {
			return err
		}
	}
	if d.synced {
		return d.q.TurboSync()
	}
	return nil
}

// dequeue calls Dequeue n times: dque has no batch.
func (d *dqueQueue) dequeue(n int) (int, error) {
	for i := range n {
		obj, err := d.q.Dequeue()
		if errors.Is(err, dque.ErrEmpty) {
			return i, nil
		}
		if err != nil {
			return i, err
		}
		if it, ok := obj.(*dqueItem); !ok || len(it.V) == 0 {
			return i, fmt.Errorf("dque: item %T is not a stored value", obj)
		}
	}
	return n, nil
}

func (d *dqueQueue) consume(n int) error {
	got, err := d.dequeue(n)
	if err == nil && got < n {
		err = errEmpty
	}
	return err
}

func (d *dqueQueue) close() error { return d.q.Close() }

// bigQueue is bigqueue's queue: items appended to memory-mapped arena
// files of 128 MiB (its default), a head offset per consumer. It never
// deletes an arena: what was consumed stays on disk. Unsynced, its
// periodic flush (msync every second by default) is off, leaving the
// write-back to the OS like every unsynced row here; synced, each enqueue
// call ends with Flush (msync of the arenas and the metadata), one per
// commit.
type bigQueue struct {
	q      *bigqueue.MmapQueue
	synced bool
}

func openBigqueue(dir string, synced bool) (*bigQueue, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	q, err := bigqueue.NewMmapQueue(dir, bigqueue.SetPeriodicFlushDuration(0), bigqueue.SetPeriodicFlushOps(0))
	if err != nil {
		return nil, err
	}
	return &bigQueue{q: q, synced: synced}, nil
}

func (b *bigQueue) enqueue(items [][]byte) error {
	for _, it := range items {
		if err := b.q.Enqueue(it); err != nil {
			return err
		}
	}
	if b.synced {
		return b.q.Flush()
	}
	return nil
}

// dequeue calls Dequeue n times: bigqueue has no batch. Each returns a
// copy of the item.
func (b *bigQueue) dequeue(n int) (int, error) {
	for i := range n {
		it, err := b.q.Dequeue()
		if errors.Is(err, bigqueue.ErrEmptyQueue) {
			return i, nil
		}
		if err != nil {
			return i, err
		}
		if len(it) == 0 {
			return i, errors.New("bigqueue: empty item")
		}
	}
	return n, nil
}

func (b *bigQueue) consume(n int) error {
	got, err := b.dequeue(n)
	if err == nil && got < n {
		err = errEmpty
	}
	return err
}

func (b *bigQueue) close() error { return b.q.Close() }
