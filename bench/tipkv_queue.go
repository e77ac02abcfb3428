package main

import (
	"errors"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
)

// tipkvQueue is a queue.Queue of raw bytes, dequeued with Pop (at most
// once, as goque's Dequeue).
type tipkvQueue struct {
	db *tipkv.DB
	q  *queue.Queue[[]byte]
}

func openTipkvQueue(dir string, cfg config, synced bool) (*tipkvQueue, error) {
	db, err := tipkv.Open(dir, tipkvOptions(cfg, synced))
	if err != nil {
		return nil, err
	}
	q, err := queue.Open(db, "q", &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &tipkvQueue{db: db, q: q}, nil
}

func (t *tipkvQueue) enqueue(items [][]byte) error {
	_, err := t.q.Enqueue(t.db, items...)
	return err
}

// dequeue is one Pop of n.
func (t *tipkvQueue) dequeue(n int) (int, error) {
	msgs, err := t.q.Pop(n)
	for _, m := range msgs {
		if len(m.Value) == 0 {
			return 0, errors.New("tipkv: empty message")
		}
	}
	return len(msgs), err
}

// consume pops the n oldest items, 1,000 to a Pop.
func (t *tipkvQueue) consume(n int) error {
	for n > 0 {
		msgs, err := t.q.Pop(min(n, 1000))
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return errEmpty
		}
		n -= len(msgs)
	}
	return nil
}

func (t *tipkvQueue) close() error { return t.db.Close() }
