package crash_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/once"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

// Writes guarded by idempotency keys (EnqueueOnce, AppendOnce, PutOnce,
// alone or inside an Update with a document Put), crashed at a random
// point, synced or not: after the reopen each key's record and the write
// it guards are both there or both gone, every acknowledged synced write
// survived, and a key that survived answers the first result while a lost
// one writes anew.
func TestCrashOnceKeyAndWriteTogether(t *testing.T) {
	for _, seed := range testutil.CrashSeeds(t, 16) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/crash -run 'TestCrashOnceKeyAndWriteTogether' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed^0x0ce))
			noSync := rng.IntN(2) == 0
			fs := vfs.NewCrashableMem()
			db, err := openFS("db", fs, &tipkv.Options{NoSync: noSync, MemTableSize: 256 << 10})
			require.NoError(t, err)
			q, err := queue.Open[int](db, "jobs", nil)
			require.NoError(t, err)
			feed, err := versioned.NewFeed[int](db, nil)
			require.NoError(t, err)
			docs, err := versioned.NewCollection[int](db, "docs", nil)
			require.NoError(t, err)

			type write struct {
				kind   string // "queue", "stream", "collection"
				key    string
				result int64
				acked  bool
				again  func(tipkv.Writer) (int64, error) // the same write
				dup    bool
			}
			var writes []*write
			n := 30 + rng.IntN(150)
			crashAt := rng.IntN(n)
			var crashed *vfs.MemFS
			for i := range n {
				if i == crashAt {
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
				}
				w := &write{key: fmt.Sprint("k", i)}
				var scope tipkv.Scope
				switch rng.IntN(3) {
				case 0:
					scope = tipkv.Window(time.Hour)
				case 1:
					scope = tipkv.UntilForgotten()
				default:
					scope = tipkv.UntilDone()
				}
				do := func(wr tipkv.Writer) (int64, error) {
					var r int64
					var err error
					switch w.kind = []string{"queue", "stream", "collection"}[i%3]; w.kind {
					case "queue":
						r, w.dup, err = q.EnqueueOnce(wr, w.key, scope, i)
					case "stream":
						if scope.Kind() == tipkv.ScopeUntilDone {
							scope = tipkv.UntilForgotten()
						}
						r, w.dup, err = feed.AppendOnce(wr, "s", w.key, scope, i)
					default:
						if scope.Kind() == tipkv.ScopeUntilDone {
							scope = tipkv.Window(time.Hour)
						}
						r, w.dup, err = docs.PutOnce(wr, w.key, w.key, scope, i)
					}
					return r, err
				}
				w.again = do
				if rng.IntN(2) == 0 {
					w.result, err = do(db)
				} else {
					err = db.Update(func(b *tipkv.Batch) error {
						if _, err := docs.Put(b, fmt.Sprint("side-", i), i); err != nil {
							return err
						}
						var err error
						w.result, err = do(b)
						return err
					})
				}
				require.NoError(t, err)
				w.acked = crashed == nil
				writes = append(writes, w)
				if rng.IntN(40) == 0 {
					require.NoError(t, db.Flush())
				}
			}
			require.NoError(t, db.Close())

			db, err = openFS("db", crashed, &tipkv.Options{NoSync: noSync})
			require.NoError(t, err, "reopen after the crash")
			defer db.Close()
			s, err := link.StoreOf(db)
			require.NoError(t, err)
			present := func(k []byte) bool {
				_, err := s.Get(k)
				if errors.Is(err, engine.ErrNotFound) {
					return false
				}
				require.NoError(t, err)
				return true
			}
			q, err = queue.Open[int](db, "jobs", nil)
			require.NoError(t, err)
			feed, err = versioned.NewFeed[int](db, nil)
			require.NoError(t, err)
			docs, err = versioned.NewCollection[int](db, "docs", nil)
			require.NoError(t, err)
			survived := 0
			for _, w := range writes {
				var guarded []byte
				switch w.kind {
				case "queue":
					guarded = codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "jobs"), w.result)
				case "stream":
					guarded = codec.AppendDesc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeed), "s"), w.result)
				default:
					guarded = codec.AppendDesc(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "docs"), w.key), w.result)
				}
				rec := present(once.RecordKey(nil, w.kind, nameOf(w.kind), w.key))
				wrote := present(guarded)
				require.Equal(t, wrote, rec, "%s key %q: record %v, write %v", w.kind, w.key, rec, wrote)
				if w.acked && !noSync {
					require.True(t, rec, "%s key %q: an acknowledged synced write was lost", w.kind, w.key)
				}
				if rec {
					survived++
				}
				r, err := w.again(db)
				require.NoError(t, err)
				require.Equal(t, rec, w.dup, "%s key %q: a write again is a duplicate only if the key survived", w.kind, w.key)
				if rec {
					require.Equal(t, w.result, r)
				}
			}
			t.Logf("%d of %d guarded writes survived (noSync=%v)", survived, len(writes), noSync)
			tipkvtest.Healthy(t, db)
		})
	}
}

func nameOf(kind string) string {
	switch kind {
	case "queue":
		return "jobs"
	case "stream":
		return "s"
	}
	return "docs"
}
