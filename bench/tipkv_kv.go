package main

import (
	"context"
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// tipkvKV is the kv section's tipkv side: a versioned.Collection of raw
// bytes keeping kvHistory versions per document, as the JetStream bucket
// does.
type tipkvKV struct {
	db   *tipkv.DB
	c    *versioned.Collection[[]byte]
	sink []byte
}

func openTipkvKV(dir string, cfg config) (*tipkvKV, error) {
	db, err := tipkv.Open(dir, tipkvOptions(cfg, false))
	if err != nil {
		return nil, err
	}
	c, err := versioned.NewCollection(db, "kv", &versioned.Options[[]byte]{Codec: codec.Raw{}, KeepVersions: kvHistory})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &tipkvKV{db: db, c: c}, nil
}

func (t *tipkvKV) load(recs []record) error {
	return t.db.Update(func(b *tipkv.Batch) error {
		for _, r := range recs {
			v, err := t.c.Put(b, r.id, r.value)
			if err := check(err, v == r.version, "put %s: version %d, want %d", r.id, v, r.version); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *tipkvKV) latest(id string, want int64) error {
	d, err := t.c.Latest(id)
	t.sink = d.Value
	return check(err, d.Version == want && len(d.Value) > 0, "latest of %s: version %d, want %d", id, d.Version, want)
}

func (t *tipkvKV) revision(id string, v int64) error {
	d, err := t.c.Get(id, v)
	t.sink = d.Value
	return check(err, d.Version == v && len(d.Value) > 0, "version %d of %s: got %d", v, id, d.Version)
}

func (t *tipkvKV) history(id string, n int64) error {
	var count, newest int64
	for d, err := range t.c.History(id, tipkv.Query{}) {
		if err != nil {
			return err
		}
		if count == 0 {
			newest = d.Version
		}
		t.sink = d.Value
		count++
	}
	return check(nil, count == n && newest == n, "history of %s: %d versions, newest %d, want %d", id, count, newest, n)
}

func (t *tipkvKV) put(id string, value []byte) (uint64, error) {
	v, err := t.c.Put(t.db, id, value)
	return uint64(v), err
}

// watch follows id with Collection.Watch from its latest version on.
func (t *tipkvKV) watch(ctx context.Context, id string) (<-chan uint64, error) {
	after := int64(0)
	if d, err := t.c.Latest(id); err == nil {
		after = d.Version
	}
	ch := make(chan uint64, 1024)
	go func() {
		defer close(ch)
		for c, err := range t.c.Watch(ctx, id, after) {
			if err != nil {
				if ctx.Err() == nil {
					progress("kv: tipkv watch of %s: %v", id, err)
				}
				return
			}
			if c.Kind != versioned.ChangePut {
				continue
			}
			select {
			case ch <- uint64(c.Doc.Version):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (t *tipkvKV) close() error {
	if err := t.db.Close(); err != nil {
		return fmt.Errorf("tipkv: %w", err)
	}
	return nil
}
