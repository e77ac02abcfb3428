package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/vmihailenco/msgpack/v5"
)

// cli runs the command line in process and returns its output and status.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut, testEngines)
	return out.String(), errOut.String(), code
}

// cliOK runs the command line and requires exit status 0 and no stderr.
func cliOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, args...)
	require.Equal(t, exitOK, code, "tipkv %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, errOut)
	require.Empty(t, errOut)
	return out
}

// jsonOf decodes one JSON document.
func jsonOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), "not JSON:\n%s", s)
	return m
}

// jsonLines decodes JSON Lines.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		out = append(out, jsonOf(t, line))
	}
	return out
}

// writeStore creates a store in a new directory, lets fill write to it
// with the DB's clock stopped at goldenWritten, closes it and returns the
// directory.
func writeStore(t *testing.T, fill func(db *tipkv.DB)) string {
	t.Helper()
	return writeStoreAt(t, func() time.Time { return goldenWritten }, fill)
}

// goldenWritten is the time the test stores are written at: after the
// sample's events (t0 and the four minutes after it), before goldenNow.
var goldenWritten = t0.Add(90 * time.Minute)

// fixNow stops the clock of the commands (knobs.now) at goldenNow until
// the test ends.
func fixNow(t *testing.T) {
	saved := knobs.now
	t.Cleanup(func() { knobs.now = saved })
	knobs.now = func() time.Time { return goldenNow }
}

// goldenNow is the time the commands see in TestGolden and wherever a
// test calls fixNow: after every store's writes (goldenWritten), before
// what they wrote to expire or become visible an hour later.
var goldenNow = t0.Add(2 * time.Hour)

// writeStoreAt is writeStore with the DB's clock at clock.
func writeStoreAt(t *testing.T, clock func() time.Time, fill func(db *tipkv.DB)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true, Clock: clock})
	require.NoError(t, err)
	if fill != nil {
		fill(db)
	}
	require.NoError(t, db.Close())
	return dir
}

// set writes raw keys and values in one batch.
func set(t *testing.T, db *tipkv.DB, kv ...[]byte) {
	t.Helper()
	require.NoError(t, link.Write(db, func(tx *link.Tx) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Batch.Set(kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	}))
}

// mp encodes v as msgpack, a map's keys sorted: Go ranges over a map in
// random order, and the stores of the golden files must hold the same
// bytes on every run.
func mp(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}

func vkey(coll, id string, v int64) []byte {
	return codec.AppendDesc(segPrefix(codec.FamilyVersions, coll, id), v)
}

// ikey is the key of a time index entry.
func ikey(coll, id string, t int64) []byte {
	return codec.AppendDesc(segPrefix(codec.FamilyTimeIndex, coll, id), t)
}

func fkey(stream string, pos int64) []byte {
	return codec.AppendDesc(segPrefix(codec.FamilyFeed, stream), pos)
}

func qkey(f codec.Family, queue string, seq int64) []byte {
	return codec.AppendAsc(segPrefix(f, queue), seq)
}

// qvalue is a queue item or dead letter as the queue package writes it.
func qvalue(t *testing.T, tag byte, attempts uint64, enqueued, at int64, payload any) []byte {
	b := []byte{tag}
	b = binary.AppendUvarint(b, attempts)
	b = binary.AppendVarint(b, enqueued)
	b = binary.AppendVarint(b, at)
	return append(b, mp(t, payload)...)
}

func qstate(head, tail uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint([]byte{queueStateTag}, head), tail)
}

// t0 is the time of the sample feed's oldest event.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type user struct {
	Name  string `msgpack:"name"`
	Email string `msgpack:"email"`
	Age   int    `msgpack:"age"`
}

// sample writes a small healthy store: two collections, a stream and a
// queue with a dead letter.
func sample(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		set(t, db,
			vkey("users", "alice", 1), mp(t, user{"Alice", "alice@old.example", 30}),
			vkey("users", "alice", 2), mp(t, user{"Alice", "alice@example.com", 30}),
			vkey("users", "alice", 3), mp(t, user{"Alice", "alice@example.com", 31}),
			vkey("users", "bob", 1), mp(t, user{"Bob", "bob@example.com", 45}),
			vkey("orders", "o-1", 1), mp(t, map[string]any{"total": 12.5, "items": []string{"tea"}}),
		)
		for i := range 5 {
			pos := t0.Add(time.Duration(i) * time.Minute).UnixNano()
			set(t, db, fkey("clicks", pos), mp(t, map[string]any{"page": "/p" + string(rune('0'+i))}))
		}
		enq := t0.UnixNano()
		set(t, db,
			qkey(codec.FamilyQueueItems, "jobs", 3), qvalue(t, queueItemTag, 1, enq, 0, map[string]any{"job": 3}),
			qkey(codec.FamilyQueueItems, "jobs", 4), qvalue(t, queueItemTag, 0, enq, 0, map[string]any{"job": 4}),
			segPrefix(codec.FamilyQueueState, "jobs"), qstate(3, 5),
			qkey(codec.FamilyDeadLetters, "jobs", 2), qvalue(t, queueDeadTag, 10, enq, enq+int64(time.Hour), map[string]any{"job": 2}),
		)
	})
}

// dirState returns the name and contents of every file in dir but LOCK.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(data)
	}
	return out
}

func linkStore(db *tipkv.DB) (engine.Store, error) { return link.StoreOf(db) }

// testEngines are the engines the tests' commands reach besides Pebble:
// "shared:NAME" opens a DB of the shared in-memory store NAME made by
// sharedStore, as a process of a shared engine would.
var testEngines = []Engine{{
	Name:  "the tests' shared engine",
	Match: func(target string) bool { return strings.HasPrefix(target, "shared:") },
	Open: func(_ context.Context, target string, opts *tipkv.Options) (*tipkv.DB, error) {
		sharedStores.Lock()
		h, ok := sharedStores.m[target]
		sharedStores.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: no shared store %q", tipkv.ErrNotFound, target)
		}
		return tipkv.OpenEngine(h.Handle(), target, opts)
	},
}}

var sharedStores = struct {
	sync.Mutex
	m map[string]*sharedstore.Hub
}{m: map[string]*sharedstore.Hub{}}
