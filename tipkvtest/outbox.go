package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// outboxCases returns the outbox tests: a document write and the message
// that announces it commit in one DB.Update, or neither does.
func outboxCases() []testCase {
	return []testCase{
		{"Atomic", testOutboxAtomic},
		{"Relay", testOutboxRelay},
	}
}

type outboxOrder struct {
	Item  string `msgpack:"item"`
	Count int    `msgpack:"count"`
}

type outboxEvent struct {
	Order   string `msgpack:"order"`
	Version int64  `msgpack:"version"`
}

// A failing Update writes neither the document nor its message; a
// successful one writes both, and the message names the version written.
func testOutboxAtomic(t *testing.T, b backend) {
	db := b.Open(t, nil)
	orders, err := versioned.NewCollection[outboxOrder](db, "orders", nil)
	require.NoError(t, err)
	outbox := qOpen[outboxEvent](t, db, "outbox", nil)
	place := func(id string, fail error) error {
		return db.Update(func(b *tipkv.Batch) error {
			v, err := orders.Put(b, id, outboxOrder{Item: "tea", Count: 2})
			if err != nil {
				return err
			}
			if _, err := outbox.Enqueue(b, outboxEvent{Order: id, Version: v}); err != nil {
				return err
			}
			return fail
		})
	}
	boom := errors.New("boom")
	require.ErrorIs(t, place("order-1", boom), boom)
	_, err = orders.Latest("order-1")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.Zero(t, outbox.Len())

	require.NoError(t, place("order-2", nil))
	doc, err := orders.Latest("order-2")
	require.NoError(t, err)
	ms, err := outbox.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []outboxEvent{{Order: "order-2", Version: doc.Version}}, qValues(ms))

	// An enqueue that fails (a value over the limit) fails the Update:
	// the document is not written either.
	big := qOpen[[]byte](t, db, "big", nil)
	err = db.Update(func(b *tipkv.Batch) error {
		if _, err := orders.Put(b, "order-3", outboxOrder{Item: "big"}); err != nil {
			return err
		}
		_, err := big.Enqueue(b, make([]byte, queue.MaxValueSize+1))
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = orders.Latest("order-3")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	Healthy(t, db)
}

// Producers place orders (a document and its message in one Update), on
// a second handle where the engine has one, while a relay consumes the
// outbox with ReceiveWait and acks; the relay restarts once midway where
// the backend can reopen. Every order's message is relayed, at least
// once, each naming a version that exists.
func testOutboxRelay(t *testing.T, b backend) {
	db := b.Open(t, nil)
	producerDB := db
	if b.Second != nil {
		producerDB = b.Second(t, db, nil)
	}
	orders, err := versioned.NewCollection[outboxOrder](producerDB, "orders", nil)
	require.NoError(t, err)
	n := b.N(300)
	const producers = 2
	var wg sync.WaitGroup
	errs := make(chan error, producers+1)
	for p := range producers {
		outbox := qOpen[outboxEvent](t, producerDB, "outbox", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += producers {
				id := fmt.Sprintf("order-%d", i)
				err := producerDB.Update(func(b *tipkv.Batch) error {
					v, err := orders.Put(b, id, outboxOrder{Item: "tea", Count: i})
					if err != nil {
						return err
					}
					_, err = outbox.Enqueue(b, outboxEvent{Order: id, Version: v})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
			}
		}()
	}

	relayed := map[string]int64{}
	relay := func(db *tipkv.DB, until int) {
		outbox := qOpen[outboxEvent](t, db, "outbox", nil)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a hang fails, a slow machine does not
		defer cancel()
		for len(relayed) < until {
			ms, err := outbox.ReceiveWait(ctx, 50, time.Hour)
			require.NoError(t, err)
			for _, m := range ms {
				relayed[m.Value.Order] = m.Value.Version
			}
			require.NoError(t, outbox.Ack(db, qIDs(ms)...))
		}
	}
	relay(db, n/2)
	if b.Reopen != nil && producerDB != db {
		db = b.Reopen(t, db, nil)
	}
	relay(db, n)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, relayed, n)
	for id, v := range relayed {
		doc, err := orders.Latest(id)
		require.NoError(t, err)
		require.Equal(t, v, doc.Version, "%s: the message names the version written with it", id)
	}
	outbox := qOpen[outboxEvent](t, db, "outbox", nil)
	require.Zero(t, outbox.Len())
	Healthy(t, db)
}
