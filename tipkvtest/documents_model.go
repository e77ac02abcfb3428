package tipkvtest

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentModelCases returns the model test of documents, random writes
// checked against an in-memory model, and the test of the default codec's
// field names.
func documentModelCases() []testCase {
	return []testCase{
		{"DefaultCodecNames", checked(testDefaultCodecNames)},
		{"Model", checked(testDocumentModel)},
	}
}

var documentsSeed = flag.Uint64("documents.seed", 0, "seed of the documents model test (0: from the clock)")

// docModel is what a collection should hold: per document, its surviving
// versions and their values, markerAge for a delete marker.
type docModel map[string]map[int64]int

const markerAge = -1

func (m docModel) latest(id string) int64 {
	var l int64
	for v := range m[id] {
		l = max(l, v)
	}
	return l
}

// live reports whether the document has a latest version that is not a
// delete marker.
func (m docModel) live(id string) bool {
	l := m.latest(id)
	return l > 0 && m[id][l] != markerAge
}

// next is the version a Put gets: versions are dense from the oldest
// surviving one, a delete marker is a version, and only a purged document
// starts again at 1.
func (m docModel) next(id string) int64 { return m.latest(id) + 1 }

func (m docModel) clone() docModel {
	out := docModel{}
	for id, vs := range m {
		out[id] = maps.Clone(vs)
	}
	return out
}

func newestFirst(vs map[int64]int) []int64 {
	out := slices.Collect(maps.Keys(vs))
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// testDocumentModel runs random writes (alone, in Updates that may fail,
// and on the DB inside Updates) against a collection and a model, and
// checks every read against the model. Rerun a failure with
// -documents.seed.
func testDocumentModel(t *testing.T, b backend) {
	seed := *documentsSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -documents.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	db, users := openPeople(t, b)
	m := docModel{}
	ids := []string{"a", "a\x00", "b", "\xff", "c"}
	counter := 0
	shared := Caps(t, db).Shared
	deferred := false // a run of the Update wrote a PutIf whose conflict shows at commit

	// op applies one random write on id to w and, when it succeeds, to mm.
	op := func(w tipkv.Writer, mm docModel, id string) (string, error) {
		if mm[id] == nil {
			mm[id] = map[int64]int{}
		}
		counter++
		switch r := rng.IntN(24); {
		case r < 12:
			v, err := users.Put(w, id, person{Age: counter})
			if err == nil {
				if v != mm.next(id) {
					return "", fmt.Errorf("model: Put %q gave %d, want %d", id, v, mm.next(id))
				}
				mm[id][v] = counter
			}
			return fmt.Sprintf("Put(%q)", id), err
		case r < 14:
			exp := mm.latest(id)
			switch rng.IntN(4) {
			case 0:
				exp = max(exp+int64(rng.IntN(3))-1, 0)
			case 1:
				exp = 0
			}
			v, err := users.PutIf(w, id, person{Age: counter}, exp)
			if exp != mm.latest(id) && (exp != 0 || mm.live(id)) {
				if _, inUpdate := w.(*tipkv.Batch); err == nil && inUpdate && shared {
					// On a shared engine a PutIf with nothing known of
					// the document assumes expected and guards it: the
					// conflict shows at commit, and the Update runs
					// again, reading this time.
					deferred = true
					return "PutIf(conflict at commit)", nil
				}
				if !errors.Is(err, tipkv.ErrConflict) {
					return "", fmt.Errorf("model: PutIf %q expected %d, latest %d: %v", id, exp, mm.latest(id), err)
				}
				return "PutIf(conflict)", nil
			}
			if err == nil {
				if v != mm.next(id) {
					return "", fmt.Errorf("model: PutIf %q gave %d, want %d", id, v, mm.next(id))
				}
				mm[id][v] = counter
			}
			return fmt.Sprintf("PutIf(%q, %d)", id, exp), err
		case r < 16:
			keep := 1 + rng.IntN(4)
			n, err := users.Prune(w, id, keep)
			if err == nil {
				var dropped int64
				for i, v := range newestFirst(mm[id]) {
					if i >= keep {
						delete(mm[id], v)
						dropped++
					}
				}
				if n != dropped {
					return "", fmt.Errorf("model: Prune %q dropped %d, want %d", id, n, dropped)
				}
			}
			return fmt.Sprintf("Prune(%q, %d)", id, keep), err
		case r < 18:
			before := int64(1 + rng.IntN(int(mm.latest(id))+3))
			_, err := users.PruneBefore(w, id, before)
			if err == nil {
				l := mm.latest(id)
				for v := range mm[id] {
					if v < before && v != l {
						delete(mm[id], v)
					}
				}
			}
			return fmt.Sprintf("PruneBefore(%q, %d)", id, before), err
		case r < 22:
			v, err := users.Delete(w, id)
			if err == nil && mm.live(id) {
				mm[id][mm.next(id)] = markerAge
			}
			if err == nil && v != mm.latest(id) {
				return "", fmt.Errorf("model: Delete %q returned version %d, want %d", id, v, mm.latest(id))
			}
			return fmt.Sprintf("Delete(%q)", id), err
		default:
			n, err := users.Purge(w, id)
			if err == nil {
				if n != int64(len(mm[id])) {
					return "", fmt.Errorf("model: Purge %q dropped %d, want %d", id, n, len(mm[id]))
				}
				clear(mm[id])
			}
			return fmt.Sprintf("Purge(%q)", id), err
		}
	}
	pick := func() string { return ids[rng.IntN(len(ids))] }

	boom := errors.New("boom")
	steps := b.N(250)
	for step := range steps {
		if rng.IntN(3) == 0 {
			// An Update of several writes, failing one time in three, with
			// now and then a write on the DB inside it: it commits on its
			// own for a document the Update has not written, and is
			// refused for one it has.
			var mm docModel
			fail := rng.IntN(3) == 0
			var names []string
			runs := 0
			err := db.Update(func(bt *tipkv.Batch) error {
				// A shared engine may run the function again (a single
				// handle never makes it, but the model must not count a
				// first run twice).
				runs++
				mm, names, deferred = m.clone(), nil, false
				held := map[string]bool{}
				for range 1 + rng.IntN(4) {
					id := pick()
					if rng.IntN(5) > 0 {
						name, err := op(bt, mm, id)
						if err != nil {
							return err
						}
						held[id] = true
						names = append(names, name)
						continue
					}
					if held[id] {
						_, err := users.Put(db, id, person{})
						if !errors.Is(err, tipkv.ErrInvalid) {
							return fmt.Errorf("model: Put on the DB of %q held by the Update: %v", id, err)
						}
						names = append(names, fmt.Sprintf("refused Put(db, %q)", id))
						continue
					}
					name, err := op(db, m, id)
					if err != nil {
						return err
					}
					mm[id] = maps.Clone(m[id])
					names = append(names, "db "+name)
				}
				if fail {
					return boom
				}
				return nil
			})
			if deferred && !fail {
				// The commit of the run that assumed failed, so that run
				// was not the last.
				t.Fatalf("step %d: the Update's last run wrote a PutIf that should have conflicted: %v", step, names)
			}
			if !shared {
				require.Equal(t, 1, runs, "step %d: one handle on an exclusive engine never makes an Update run again", step)
			}
			if fail {
				require.ErrorIs(t, err, boom, "step %d: %v", step, names)
			} else {
				require.NoError(t, err, "step %d: %v", step, names)
				m = mm
			}
		} else {
			name, err := op(db, m, pick())
			require.NoError(t, err, "step %d: %s", step, name)
		}
		checkDocModel(t, users, m, step, rng, step%10 == 0 || step == steps-1)
	}
}

// checkDocModel checks every read against the model; AsOf and Get of
// every version too when sweep is set.
func checkDocModel(t *testing.T, users *versioned.Collection[person], m docModel, step int, rng *rand.Rand, sweep bool) {
	t.Helper()
	var live, ids []string
	for id, vs := range m {
		ids = append(ids, id)
		want := newestFirst(vs)
		d, err := users.Latest(id)
		if !m.live(id) {
			require.ErrorIs(t, err, tipkv.ErrNotFound, "step %d: Latest(%q)", step, id)
		} else {
			live = append(live, id)
			require.NoError(t, err, "step %d", step)
			require.Equal(t, want[0], d.Version, "step %d: Latest(%q)", step, id)
			require.Equal(t, vs[want[0]], d.Value.Age, "step %d: Latest(%q)", step, id)
		}
		n, err := users.Count(id)
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), n, "step %d: Count(%q)", step, id)

		hist := testutil.Collect(t, users.History(id, tipkv.Query{}))
		require.Equal(t, want, versionsOf(hist), "step %d: History(%q)", step, id)
		for _, h := range hist {
			require.Equal(t, vs[h.Version] == markerAge, h.Deleted, "step %d: %q v%d", step, id, h.Version)
			if !h.Deleted {
				require.Equal(t, vs[h.Version], h.Value.Age, "step %d: %q v%d", step, id, h.Version)
			}
		}
		limit := 1 + rng.IntN(3)
		var paged []int64
		q := tipkv.Query{Limit: limit}
		for {
			page, next, err := users.HistoryPage(id, q)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), limit)
			paged = append(paged, versionsOf(page)...)
			if next == "" {
				break
			}
			require.Len(t, page, limit, "step %d: a page with a next is full", step)
			q.After = next
		}
		require.Equal(t, want, paged, "step %d: HistoryPage(%q) by %d", step, id, limit)

		for at := int64(1); sweep && at <= m.latest(id)+1; at++ {
			d, err := users.AsOf(id, at)
			i := slices.IndexFunc(want, func(v int64) bool { return v <= at })
			if i < 0 || vs[want[i]] == markerAge {
				require.ErrorIs(t, err, tipkv.ErrNotFound, "step %d: AsOf(%q, %d)", step, id, at)
				continue
			}
			require.NoError(t, err)
			require.Equal(t, want[i], d.Version, "step %d: AsOf(%q, %d)", step, id, at)
			d, err = users.Get(id, at)
			if x, ok := vs[at]; !ok || x == markerAge {
				require.ErrorIs(t, err, tipkv.ErrNotFound, "step %d: Get(%q, %d)", step, id, at)
			} else {
				require.NoError(t, err)
				require.Equal(t, x, d.Value.Age)
			}
		}
	}
	slices.Sort(live)
	var got []string
	for _, d := range testutil.Collect(t, users.LatestAll(tipkv.Query{})) {
		got = append(got, d.ID)
		require.Equal(t, m.latest(d.ID), d.Version, "step %d: LatestAll %q", step, d.ID)
	}
	require.Equal(t, live, got, "step %d: LatestAll ids", step)

	ids = append(append(ids, "never"), ids...)
	many, err := users.LatestMany(ids...)
	require.NoError(t, err)
	require.Len(t, many, len(ids))
	for i, id := range ids {
		if !m.live(id) {
			require.Zero(t, many[i].Version, "step %d: LatestMany %q", step, id)
			continue
		}
		require.Equal(t, id, many[i].ID)
		require.Equal(t, m.latest(id), many[i].Version, "step %d: LatestMany %q", step, id)
		require.Equal(t, m[id][m.latest(id)], many[i].Value.Age)
	}
}

// tagged is a document type with json tags and no msgpack tags, as a type
// shared with an HTTP API has.
type tagged struct {
	FullName string `json:"full_name"`
	Age      int    `json:"age"`
}

// Meta keys of the root package, to turn a store into one created at
// format 1 (see tipkv.FormatVersion).
var (
	metaFormatKey = codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "format")
	metaNamesKey  = codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "value-names")
)

// storedNames returns the field names of the msgpack map stored at key.
func storedNames(t testing.TB, db *tipkv.DB, key []byte) []string {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	raw, err := s.Get(key)
	require.NoError(t, err)
	var m map[string]any
	doc := docfmt.Rules{}.Parse(raw).Doc // a document version's header off; a feed's value is the document
	require.NoError(t, codec.Msgpack[map[string]any]{}.Decode(doc, &m))
	names := slices.Collect(maps.Keys(m))
	slices.Sort(names)
	return names
}

// The default codec names fields as the store was created to: by json tag
// on a store created now, by Go name on a store created at format 1, so
// that values written there before json tags counted still read.
func testDefaultCodecNames(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	db := b.Open(t, nil)
	docs, err := versioned.NewCollection[tagged](db, "tagged", nil)
	require.NoError(t, err)
	feed, err := versioned.NewFeed[tagged](db, nil)
	require.NoError(t, err)
	_, err = docs.Put(db, "a", tagged{FullName: "Ada", Age: 36})
	require.NoError(t, err)
	require.Equal(t, []string{"age", "full_name"}, storedNames(t, db, versionKey("tagged", "a", 1)), "a new store: json names")
	p, err := feed.Append(db, "s", tagged{FullName: "Ada"})
	require.NoError(t, err)
	require.Equal(t, []string{"age", "full_name"}, storedNames(t, db, feedKey("s", p)))

	// The same store as format 1 left it: no naming recorded.
	require.NoError(t, link.Write(db, func(tx *link.Tx) error {
		if err := tx.Batch.Set(metaFormatKey, []byte("1")); err != nil {
			return err
		}
		return tx.Batch.Delete(metaNamesKey)
	}))
	// A value a format-1 tipkv wrote: Go names.
	old, err := codec.Msgpack[tagged]{IgnoreJSONTags: true}.Append(nil, tagged{FullName: "Old", Age: 99})
	require.NoError(t, err)
	rawSet(t, db, versionKey("tagged", "old", 1), old)
	db = b.Reopen(t, db, nil)
	docs, err = versioned.NewCollection[tagged](db, "tagged", nil)
	require.NoError(t, err)
	feed, err = versioned.NewFeed[tagged](db, nil)
	require.NoError(t, err)

	d, err := docs.Latest("old")
	require.NoError(t, err)
	require.Equal(t, tagged{FullName: "Old", Age: 99}, d.Value, "a format-1 value reads back whole")
	_, err = docs.Put(db, "b", tagged{FullName: "Bob", Age: 7})
	require.NoError(t, err)
	require.Equal(t, []string{"Age", "FullName"}, storedNames(t, db, versionKey("tagged", "b", 1)), "a format-1 store: Go names")
	d, err = docs.Latest("b")
	require.NoError(t, err)
	require.Equal(t, tagged{FullName: "Bob", Age: 7}, d.Value)
	p, err = feed.Append(db, "s", tagged{FullName: "Bob"})
	require.NoError(t, err)
	require.Equal(t, []string{"Age", "FullName"}, storedNames(t, db, feedKey("s", p)))
	events := testutil.Collect(t, feed.Newest("s", tipkv.Query{Limit: 1}))
	require.Equal(t, "Bob", events[0].Value.FullName)

	// A codec given in the options is used as it is.
	explicit, err := versioned.NewCollection[tagged](db, "explicit", &versioned.Options[tagged]{Codec: codec.Msgpack[tagged]{}})
	require.NoError(t, err)
	_, err = explicit.Put(db, "c", tagged{FullName: "C"})
	require.NoError(t, err)
	require.Equal(t, []string{"age", "full_name"}, storedNames(t, db, versionKey("explicit", "c", 1)))
}
