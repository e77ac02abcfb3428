package tipkvtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/once"
)

// onceRec is the model of one idempotency key's record: what the write
// it guards produced and when it stops holding.
type onceRec struct {
	result int64 // the first write's sequence number, position or version
	value  int64 // its content
	kind   tipkv.ScopeKind
	due    time.Time // a window's end
}

// onceName names a record: its space ("queue", "stream", "collection"),
// the queue, stream or collection, and the key.
type onceName struct{ space, name, key string }

// onceModel is what the keys of a store should be, beside the queue
// models of the queues they guard.
type onceModel struct {
	now    func() time.Time
	queues map[string]*queueModel
	// recs are the records that may be in the store: written and not
	// forgotten (the sweep may have deleted those that ended).
	recs map[onceName]*onceRec
}

// holds says whether the record r of n holds now, by tipkv.Scope's
// table: a window until its end, an until-done key while its message is
// in the queue or among its dead letters, an until-forgotten key always.
func (m *onceModel) holds(n onceName, r *onceRec) bool {
	switch r.kind {
	case tipkv.ScopeWindow:
		return m.now().Before(r.due)
	case tipkv.ScopeUntilDone:
		qm := m.queues[n.name]
		for _, x := range qm.live {
			if x.seq == r.result {
				return true
			}
		}
		for _, d := range qm.dead {
			if d.seq == r.result {
				return true
			}
		}
		return false
	}
	return true
}

// held returns the record of n if it holds now.
func (m *onceModel) held(n onceName) (*onceRec, bool) {
	r, ok := m.recs[n]
	if !ok || !m.holds(n, r) {
		return nil, false
	}
	return r, true
}

// write is what a write guarded by n must do with content value: return
// the first result and dup (the key holds, same content), fail with
// tipkv.ErrIdempotencyMismatch (it holds, other content), or write anew.
type onceWant struct {
	dup, mismatch bool
	result        int64
}

func (m *onceModel) want(n onceName, value int64) onceWant {
	r, ok := m.held(n)
	switch {
	case !ok:
		return onceWant{}
	case r.value != value:
		return onceWant{mismatch: true}
	}
	return onceWant{dup: true, result: r.result}
}

// compareOnceKeys compares the key records in db's store with the model:
// every record in the store is one the model may hold (none resurrected,
// none forgotten left); every key the model says holds has its record,
// with the first result, its scope and its window's end. After a sweep
// (swept), no record of an ended key that the sweep must delete is left:
// windows that ended, and until-done keys of consumed messages below the
// queue's first live one.
func compareOnceKeys(t *testing.T, step int, op string, db *tipkv.DB, m *onceModel, swept bool) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	it, err := s.NewIter([]byte{byte(codec.FamilyOnce)}, []byte{byte(codec.FamilyOnce) + 1})
	require.NoError(t, err)
	stored := map[onceName]once.Record{}
	for ok := it.First(); ok; ok = it.Next() {
		n, err := parseOnceRecordKey(it.Key())
		require.NoError(t, err)
		v, err := it.Value()
		require.NoError(t, err)
		rec, err := once.Parse(v)
		require.NoError(t, err)
		stored[n] = rec
	}
	require.NoError(t, it.Close())
	for n, rec := range stored {
		mr, ok := m.recs[n]
		require.True(t, ok, "step %d after %s: a record of %v that the model does not have: %+v", step, op, n, rec)
		holds := m.holds(n, mr)
		if holds {
			require.Equal(t, mr.result, rec.Result, "step %d after %s: %v: the first result", step, op, n)
			require.Equal(t, mr.kind, tipkv.ScopeKind(rec.Kind), "step %d after %s: %v: its scope", step, op, n)
			if mr.kind == tipkv.ScopeWindow {
				require.Equal(t, mr.due.UnixNano(), rec.Due, "step %d after %s: %v: its window's end", step, op, n)
			}
		}
		if swept && !holds {
			switch mr.kind {
			case tipkv.ScopeWindow:
				t.Fatalf("step %d after %s: %v: a window that ended outlived the sweep", step, op, n)
			case tipkv.ScopeUntilDone:
				qm := m.queues[n.name]
				if len(qm.live) == 0 || mr.result < qm.live[0].seq {
					t.Fatalf("step %d after %s: %v: the key of consumed message %d outlived the sweep", step, op, n, mr.result)
				}
			}
		}
	}
	for n, mr := range m.recs {
		if m.holds(n, mr) {
			_, ok := stored[n]
			require.True(t, ok, "step %d after %s: %v holds, but its record is gone", step, op, n)
		}
	}
}

// parseOnceRecordKey splits a record's key: 07 | space | name | key.
func parseOnceRecordKey(k []byte) (onceName, error) {
	var n onceName
	_, rest, err := codec.DecodeFamily(k)
	if err == nil {
		n.space, rest, err = codec.DecodeString(rest)
	}
	if err == nil {
		n.name, rest, err = codec.DecodeString(rest)
	}
	if err == nil {
		n.key, rest, err = codec.DecodeString(rest)
	}
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%d bytes after the key", len(rest))
	}
	if err != nil {
		return n, fmt.Errorf("record key %x: %w", k, err)
	}
	return n, nil
}
