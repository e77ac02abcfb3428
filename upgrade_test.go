package tipkv_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// edgeValues are document values that older formats stored as documents
// and that start with C1, and values around them.
var edgeValues = map[string][]byte{
	"escape":          {0xc1, 0x00, 'a', 'b', 'c'},
	"escape-only":     {0xc1, 0x00},
	"header":          {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 5, 'x', 'y'},
	"header-max":      {0xc1, 0x01, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	"header-zero":     {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 'z'},
	"header-negative": {0xc1, 0x01, 0x80, 0, 0, 0, 0, 0, 0, 1},
	"header-short":    {0xc1, 0x01, 1, 2, 3},
	"c1-02":           {0xc1, 0x02},
	"c1-c1":           {0xc1, 0xc1},
	"empty":           {},
	"plain":           []byte("plain"),
	"msgpack":         {0x81, 0xa1, 'a', 0x01},
}

// version is one version of a document as a legacy store holds it.
type version struct {
	v     int64
	value []byte // nil: a delete marker (format 2)
}

// versionKey is 01 | coll | id | desc(v).
func versionKey(coll, id string, v int64) []byte {
	k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll)
	return codec.AppendDesc(codec.AppendString(k, id), v)
}

// writeLegacy makes the store in dir on fs one of format (1 to 3): it
// writes docs of collection coll through the storage contract, as that
// format's tipkv stored them, and its meta keys.
func writeLegacy(t testing.TB, fs vfs.FS, dir string, format int, coll string, docs map[string][]version) {
	t.Helper()
	db, err := tipkv.OpenFS(dir, fs, &tipkv.Options{MemTableSize: 256 << 10})
	require.NoError(t, err)
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	b := s.NewBatch()
	require.NoError(t, b.Set(codec.AppendString([]byte{0x00}, "format"), []byte(strconv.Itoa(format))))
	names := codec.AppendString([]byte{0x00}, "value-names")
	if format == 1 {
		require.NoError(t, b.Delete(names))
	} else {
		require.NoError(t, b.Set(names, []byte("json")))
	}
	for id, vs := range docs {
		for _, v := range vs {
			val := v.value
			if val == nil {
				val = []byte{0xc1}
			}
			require.NoError(t, b.Set(versionKey(coll, id, v.v), val))
		}
	}
	require.NoError(t, b.Apply(true))
	require.NoError(t, b.Wait())
	require.NoError(t, b.Close())
	require.NoError(t, db.Close())
}

// legacyDocs returns documents of format: for each edge value, a document
// whose version 1 is plain and version 2 the edge value; for format 1 also
// the single byte C1 (a document there); for format 2 delete markers.
//
// For format 3: values that format 3 read as documents and format 4 would
// take for a version header (a store of format 3 holds them when tipkv
// before issue 24's fix upgraded it from format 2 without escaping them),
// beside format 3's delete markers and plain values.
func legacyDocs(format int) map[string][]version {
	docs := map[string][]version{}
	if format == 3 {
		docs["deleted"] = []version{{1, []byte("d1")}, {2, nil}}
		docs["header4"] = []version{{1, []byte("h1")}, {2, []byte{0xc1, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}}}
		docs["marker4"] = []version{{1, []byte{0xc1, 0x14, 0, 0, 0, 0, 0, 0, 0, 7}}}
		docs["meta4"] = []version{{1, []byte{0xc1, 0x12, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'm', 'd'}}}
		docs["expiry4"] = []version{{1, []byte{0xc1, 0x11, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0, 0, 0, 0, 0, 0, 0, 'e'}}}
		docs["plain"] = []version{{1, []byte("plain")}}
		return docs
	}
	for name, v := range edgeValues {
		docs[name] = []version{{1, []byte("v1 of " + name)}, {2, v}}
	}
	if format == 1 {
		docs["c1"] = []version{{1, []byte{0xc1}}}
		docs["c1-then"] = []version{{1, []byte{0xc1}}, {2, []byte{0xc1, 0x00, 'q'}}}
	} else {
		docs["deleted"] = []version{{1, []byte{0xc1, 0x00, 'd'}}, {2, nil}}
		docs["recreated"] = []version{{1, []byte("r1")}, {2, nil}, {3, []byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 1}}}
	}
	return docs
}

// readDocs reads every document of docs back through a raw collection and
// requires that each version reads as docs says, newest first, markers
// included.
func readDocs(t *testing.T, db *tipkv.DB, coll string, docs map[string][]version, when string) {
	t.Helper()
	c, err := versioned.NewCollection[[]byte](db, coll, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	for id, vs := range docs {
		var got []version
		for d, err := range c.History(id, tipkv.Query{}) {
			require.NoError(t, err, "%s: %s", when, id)
			v := version{v: d.Version, value: d.Value}
			if v.value == nil && !d.Deleted {
				v.value = []byte{}
			}
			got = append(got, v)
		}
		want := make([]version, len(vs))
		for i, v := range vs {
			want[len(vs)-1-i] = v
			if v.value != nil && len(v.value) == 0 {
				want[len(vs)-1-i].value = []byte{}
			}
		}
		require.Equal(t, want, got, "%s: history of %q", when, id)
		latest := vs[len(vs)-1]
		d, err := c.Latest(id)
		if latest.value == nil {
			require.ErrorIs(t, err, tipkv.ErrNotFound, "%s: %q is deleted", when, id)
			continue
		}
		require.NoError(t, err, "%s: latest of %q", when, id)
		require.True(t, bytes.Equal(latest.value, d.Value), "%s: latest of %q is %x, want %x", when, id, d.Value, latest.value)
	}
}

// checkHealthy runs the store checker on db.
func checkHealthy(t *testing.T, db *tipkv.DB) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	require.NoError(t, check.Store(s, check.Options{FormatVersion: tipkv.FormatVersion}).Err())
}

// A store of format 1, 2 or 3 whose documents start with C1 reads the
// same read-only (by its own format), after the upgrade and after a
// reopen; a purge of expired documents finds none, since none had a time
// to live. For format 3 this is the proof that the upgrade to format 4
// must walk the versions: without the walk, values of format 2 left
// unescaped in it would read as version headers.
func TestUpgradeKeepsValues(t *testing.T) {
	for _, format := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("format=", format), func(t *testing.T) {
			fs := vfs.NewMem()
			docs := legacyDocs(format)
			writeLegacy(t, fs, "db", format, "blobs", docs)
			future := func() time.Time { return time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) }

			ro, err := tipkv.OpenFS("db", fs, &tipkv.Options{ReadOnly: true, Clock: future})
			require.NoError(t, err)
			readDocs(t, ro, "blobs", docs, "read-only before the upgrade")
			require.NoError(t, ro.Close())

			db, err := tipkv.OpenFS("db", fs, &tipkv.Options{Clock: future})
			require.NoError(t, err)
			readDocs(t, db, "blobs", docs, "after the upgrade")
			ttl, err := versioned.NewCollection[[]byte](db, "blobs", &versioned.Options[[]byte]{Codec: codec.Raw{}, TTL: time.Hour, PurgeInterval: -1})
			require.NoError(t, err)
			st, err := ttl.PurgeExpired(context.Background())
			require.NoError(t, err)
			require.Zero(t, st.Purged, "no document had a time to live")
			checkHealthy(t, db)
			require.NoError(t, db.Close())

			db, err = tipkv.OpenFS("db", fs, &tipkv.Options{ReadOnly: true, Clock: future})
			require.NoError(t, err)
			readDocs(t, db, "blobs", docs, "after a reopen")
			checkHealthy(t, db)
			s, _ := link.StoreOf(db)
			v, err := s.Get(codec.AppendString([]byte{0x00}, "format"))
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(tipkv.FormatVersion), string(v))
			_, err = s.Get(codec.AppendString([]byte{0x00}, "upgrade"))
			require.ErrorIs(t, err, engine.ErrNotFound, "the upgrade is recorded as done")
			require.NoError(t, db.Close())
		})
	}
}

// randomDocs returns n documents of format with 1 to 3 versions each,
// about a third of the values starting with C1 (so that the upgrade
// rewrites them), delete markers in format 2.
func randomDocs(rng *rand.Rand, format, n int) map[string][]version {
	docs := map[string][]version{}
	for i := range n {
		vs := make([]version, 1+rng.IntN(3))
		for j := range vs {
			vs[j].v = int64(j + 1)
			switch rng.IntN(6) {
			case 0:
				vs[j].value = []byte{0xc1, 0x00, byte(i), byte(j)}
			case 1:
				vs[j].value = []byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, byte(i), 1, byte(j)}
			case 2:
				vs[j].value = []byte{0xc1}
				if format == 2 {
					vs[j].value = nil // a delete marker
				}
			default:
				vs[j].value = fmt.Appendf(nil, "doc %d v%d", i, j+1)
			}
		}
		docs[fmt.Sprintf("doc-%04d", i)] = vs
	}
	return docs
}

// An upgrade killed at any step (before its first batch, before, during
// or after a chunk's commit, unsynced data partly kept) leaves a store
// that the next Open finishes, or that is untouched; killed again while
// that Open resumes it, the one after finishes it. Meanwhile a read-only
// Open reads the store as it was written, or refuses it (an upgrade half
// done). Every value then reads as it was written, none escaped twice.
func TestUpgradeCrash(t *testing.T) {
	for _, seed := range testutil.CrashSeeds(t, 16) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestUpgradeCrash' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed^0x0f0f))
			format := 1 + rng.IntN(2)
			fs := vfs.NewCrashableMem()
			docs := randomDocs(rng, format, 200+rng.IntN(200))
			writeLegacy(t, fs, "db", format, "blobs", docs)
			defer tipkv.SetUpgradeChunk(1+rng.IntN(64), 1+rng.IntN(16))()

			// upgradeOn opens the store on fs for writing and counts the
			// steps of its upgrade; at step at (if it comes) it takes a
			// crash clone of fs, which it returns.
			upgradeOn := func(fs *vfs.MemFS, at int) (crashed *vfs.MemFS, steps int) {
				defer tipkv.SetUpgradeHook(func(db *tipkv.DB, name string, escaped int) {
					if steps == at {
						crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
					}
					steps++
				})()
				db, err := tipkv.OpenFS("db", fs, nil)
				require.NoError(t, err)
				require.NoError(t, db.Close())
				return crashed, steps
			}
			// readOnly opens a crashed store read-only: it reads as written,
			// or is refused because its upgrade is half done.
			readOnly := func(fs *vfs.MemFS) {
				db, err := tipkv.OpenFS("db", fs.CrashClone(vfs.CrashCloneCfg{}), &tipkv.Options{ReadOnly: true})
				if err != nil {
					require.ErrorIs(t, err, tipkv.ErrFormat)
					require.Contains(t, err.Error(), "interrupted")
					return
				}
				readDocs(t, db, "blobs", docs, "read-only after a crash")
				require.NoError(t, db.Close())
			}

			_, steps := upgradeOn(fs.CrashClone(vfs.CrashCloneCfg{}), -1)
			require.Greater(t, steps, 3, "an upgrade of several chunks")
			at := rng.IntN(steps)
			crashed, _ := upgradeOn(fs, at)
			t.Logf("format %d, %d documents, crashed at step %d of %d", format, len(docs), at, steps)
			readOnly(crashed)
			if at == 0 {
				s, _ := link.StoreOf(mustOpen(t, crashed.CrashClone(vfs.CrashCloneCfg{}), true))
				v, err := s.Get(codec.AppendString([]byte{0x00}, "format"))
				require.NoError(t, err)
				require.Equal(t, strconv.Itoa(format), string(v), "killed before its first batch, the store is untouched")
			}
			if rng.IntN(2) == 0 {
				_, steps := upgradeOn(crashed.CrashClone(vfs.CrashCloneCfg{}), -1)
				if steps > 0 {
					at := rng.IntN(steps)
					crashed, _ = upgradeOn(crashed, at)
					t.Logf("crashed again at step %d of %d", at, steps)
					readOnly(crashed)
				}
			}
			db := mustOpen(t, crashed, false)
			readDocs(t, db, "blobs", docs, "after the crash")
			checkHealthy(t, db)
		})
	}
}

// mustOpen opens the store "db" on fs, closed when the test ends.
func mustOpen(t *testing.T, fs vfs.FS, readOnly bool) *tipkv.DB {
	t.Helper()
	db, err := tipkv.OpenFS("db", fs, &tipkv.Options{ReadOnly: readOnly})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// sharedLegacy returns a Pebble store in memory holding docs as a store of
// format held them, for shared handles (sharedstore) to open.
func sharedLegacy(t *testing.T, format int, docs map[string][]version) *pebblestore.Store {
	t.Helper()
	fs := vfs.NewMem()
	writeLegacy(t, fs, "db", format, "blobs", docs)
	ps, err := pebblestore.Open("db", pebblestore.Config{FS: fs, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	return ps
}

// recordLogs is a slog handler that keeps the records of upgrades.
type recordLogs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLogs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *recordLogs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLogs) WithGroup(string) slog.Handler      { return h }

// attr returns the int attribute key of the first record with message msg.
func (h *recordLogs) attr(msg, key string) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		var v int64
		found := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v, found = a.Value.Int64(), true
			}
			return !found
		})
		return v, found
	}
	return 0, false
}

// Processes of a shared engine that open one store of format 2 at once
// upgrade it together, each chunk once: one of them is made to lose a
// chunk to another (its commit-time condition fails and it reads the
// position again), and every value reads as it was written.
func TestUpgradeSharedConcurrent(t *testing.T) {
	for _, format := range []int{1, 2} {
		t.Run(fmt.Sprint("format=", format), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(format), 7))
			docs := randomDocs(rng, format, 300)
			hub := sharedstore.New(sharedLegacy(t, format, docs), sharedstore.Options{MaxBatchOps: 8})
			defer tipkv.SetUpgradeChunk(50, 1024)()

			// "slow" reads its first chunk, then waits until another process
			// has made a chunk durable, so that its own commit of that chunk
			// fails; the others wait, before their first step, until slow
			// has read its chunk.
			ready, other := make(chan struct{}), make(chan struct{})
			var readyOnce, otherOnce sync.Once
			defer tipkv.SetUpgradeHook(func(db *tipkv.DB, step string, escaped int) {
				switch {
				case db.Dir() == "slow" && step == "apply":
					readyOnce.Do(func() {
						close(ready)
						<-other
					})
				case db.Dir() != "slow":
					<-ready
					if step == "durable" {
						otherOnce.Do(func() { close(other) })
					}
				}
			})()
			logs := &recordLogs{}
			var wg sync.WaitGroup
			dbs := make([]*tipkv.DB, 3)
			errs := make([]error, 3)
			for i, name := range []string{"slow", "b", "c"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					opts := &tipkv.Options{}
					if name == "slow" {
						opts.Logger = slog.New(logs)
					}
					d, err := tipkv.OpenEngine(hub.Handle(), name, opts)
					errs[i] = err
					if err == nil {
						dbs[i] = d
					}
				}()
			}
			wg.Wait()
			for i, db := range dbs {
				require.NoError(t, errs[i])
				defer db.Close()
			}
			retries, ok := logs.attr("tipkv: store format upgraded", "retries")
			require.True(t, ok, "the slow process took part in the upgrade")
			require.GreaterOrEqual(t, retries, int64(1), "its chunk was committed by another process first")
			for _, db := range dbs {
				readDocs(t, db, "blobs", docs, "after the upgrade, on "+db.Dir())
			}
			checkHealthy(t, dbs[0])
		})
	}
}

// Free-running: many shared handles upgrade one store at once, with small
// chunks; whatever the interleaving, every value reads as written.
func TestUpgradeSharedRace(t *testing.T) {
	for round := range 4 {
		rng := rand.New(rand.NewPCG(uint64(round), 11))
		format := 1 + round%2
		docs := randomDocs(rng, format, 200)
		hub := sharedstore.New(sharedLegacy(t, format, docs), sharedstore.Options{MaxBatchOps: 2 + rng.IntN(6)})
		restore := tipkv.SetUpgradeChunk(1+rng.IntN(20), 1024)
		var wg sync.WaitGroup
		dbs := make([]*tipkv.DB, 4)
		for i := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := tipkv.OpenEngine(hub.Handle(), fmt.Sprint("p", i), nil)
				if assert.NoError(t, err) {
					dbs[i] = d
				}
			}()
		}
		wg.Wait()
		restore()
		for _, db := range dbs {
			require.NotNil(t, db)
			readDocs(t, db, "blobs", docs, fmt.Sprintf("round %d, on %s", round, db.Dir()))
		}
		checkHealthy(t, dbs[0])
		for _, db := range dbs {
			require.NoError(t, db.Close())
		}
	}
}

// On a shared engine a read-only DB of a store not yet upgraded is refused
// (another process could upgrade it under it), saying what to do; and a
// value that cannot be escaped within the engine's limits stops the
// upgrade with an error naming its key, until the limits are raised.
func TestUpgradeSharedRefusals(t *testing.T) {
	big := append([]byte{0xc1, 0x00}, bytes.Repeat([]byte{'b'}, 300)...)
	docs := map[string][]version{"small": {{1, []byte{0xc1, 0x00, 's'}}}, "zbig": {{1, big}}}
	ps := sharedLegacy(t, 2, docs)
	_, err := tipkv.OpenEngine(sharedstore.New(ps, sharedstore.Options{}).Handle(), "ro", &tipkv.Options{ReadOnly: true})
	require.ErrorIs(t, err, tipkv.ErrFormat)
	require.Contains(t, err.Error(), "open it once for writing")

	_, err = tipkv.OpenEngine(sharedstore.New(ps, sharedstore.Options{MaxBatchBytes: 16<<10 + 200}).Handle(), "small-limits", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Contains(t, err.Error(), fmt.Sprintf("%x", versionKey("blobs", "zbig", 1)))
	_, err = tipkv.OpenEngine(sharedstore.New(ps, sharedstore.Options{}).Handle(), "ro", &tipkv.Options{ReadOnly: true})
	require.ErrorIs(t, err, tipkv.ErrFormat, "half upgraded")
	require.Contains(t, err.Error(), "interrupted")

	d, err := tipkv.OpenEngine(sharedstore.New(ps, sharedstore.Options{}).Handle(), "raised", nil)
	require.NoError(t, err, "the limits raised, the upgrade goes on")
	db := d
	defer db.Close()
	readDocs(t, db, "blobs", docs, "after the upgrade")
	checkHealthy(t, db)
}
