package main

import (
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// tipkvFeed is a versioned.Feed of raw-byte events.
type tipkvFeed struct {
	db   *tipkv.DB
	f    *versioned.Feed[[]byte]
	sink []byte
}

func openTipkvFeed(dir string, cfg config) (*tipkvFeed, error) {
	db, err := tipkv.Open(dir, tipkvOptions(cfg, false))
	if err != nil {
		return nil, err
	}
	f, err := versioned.NewFeed(db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &tipkvFeed{db: db, f: f}, nil
}

func (t *tipkvFeed) append(evs []event) error {
	return t.db.Update(func(b *tipkv.Batch) error {
		for _, e := range evs {
			if _, err := t.f.AppendAt(b, e.stream, time.Unix(0, e.at), e.value); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *tipkvFeed) settle() error {
	if err := t.db.Flush(); err != nil {
		return err
	}
	return t.db.Compact()
}

func (t *tipkvFeed) read(events func(yield func(versioned.Event[[]byte], error) bool)) (int, int64, error) {
	count, oldest := 0, int64(0)
	for e, err := range events {
		if err != nil {
			return 0, 0, err
		}
		t.sink = e.Value
		oldest = e.Position
		count++
	}
	return count, oldest, nil
}

func (t *tipkvFeed) newest(stream string, n int) (int, int64, error) {
	return t.read(t.f.Newest(stream, tipkv.Query{Limit: n}))
}

func (t *tipkvFeed) between(stream string, from, to int64) (int, int64, error) {
	return t.read(t.f.Between(stream, time.Unix(0, from), time.Unix(0, to), tipkv.Query{}))
}

func (t *tipkvFeed) close() error { return t.db.Close() }
