package versioned_test

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
	"github.com/tipkv/tipkv/versioned"
)

var modelSeed = flag.Uint64("model.seed", 0, "seed of TestModel (0: from the clock)")

// model is what a collection should hold: per document, its surviving
// versions and their values, markerAge for a delete marker.
type model map[string]map[int64]int

const markerAge = -1

func (m model) latest(id string) int64 {
	var l int64
	for v := range m[id] {
		l = max(l, v)
	}
	return l
}

// live reports whether the document has a latest version that is not a
// delete marker.
func (m model) live(id string) bool {
	l := m.latest(id)
	return l > 0 && m[id][l] != markerAge
}

// next is the version a Put gets: versions are dense from the oldest
// surviving one, a delete marker is a version, and only a purged document
// starts again at 1.
func (m model) next(id string) int64 { return m.latest(id) + 1 }

// TestModel runs random writes (alone, in Updates that may fail, and on
// the DB inside Updates) against a collection and a model, and checks
// every read against the model. Rerun a failure with -model.seed.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	db, users := openUsers(t)
	m := model{}
	ids := []string{"a", "a\x00", "b", "\xff", "c"}
	counter := 0

	// op applies one random write on id to w and, when it succeeds, to mm.
	op := func(w tipkv.Writer, mm model, id string) (string, error) {
		if mm[id] == nil {
			mm[id] = map[int64]int{}
		}
		counter++
		switch r := rng.IntN(24); {
		case r < 12:
			v, err := users.Put(w, id, user{Age: counter})
			if err == nil {
				if v != mm.next(id) {
					return "", fmt.Errorf("Put %q gave %d, want %d", id, v, mm.next(id))
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
			v, err := users.PutIf(w, id, user{Age: counter}, exp)
			if exp != mm.latest(id) && (exp != 0 || mm.live(id)) {
				if !errors.Is(err, tipkv.ErrConflict) {
					return "", fmt.Errorf("PutIf %q expected %d, latest %d: %v", id, exp, mm.latest(id), err)
				}
				return "PutIf(conflict)", nil
			}
			if err == nil {
				if v != mm.next(id) {
					return "", fmt.Errorf("PutIf %q gave %d, want %d", id, v, mm.next(id))
				}
				mm[id][v] = counter
			}
			return fmt.Sprintf("PutIf(%q, %d)", id, exp), err
		case r < 16:
			keep := 1 + rng.IntN(4)
			n, err := users.Prune(w, id, keep)
			if err == nil {
				var dropped int64
				for i, v := range versionList(mm[id]) {
					if i >= keep {
						delete(mm[id], v)
						dropped++
					}
				}
				if n != dropped {
					return "", fmt.Errorf("Prune %q dropped %d, want %d", id, n, dropped)
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
			err := users.Delete(w, id)
			if err == nil && mm.live(id) {
				mm[id][mm.next(id)] = markerAge
			}
			return fmt.Sprintf("Delete(%q)", id), err
		default:
			n, err := users.Purge(w, id)
			if err == nil {
				if n != int64(len(mm[id])) {
					return "", fmt.Errorf("Purge %q dropped %d, want %d", id, n, len(mm[id]))
				}
				clear(mm[id])
			}
			return fmt.Sprintf("Purge(%q)", id), err
		}
	}
	pick := func() string { return ids[rng.IntN(len(ids))] }

	boom := errors.New("boom")
	for step := range 500 {
		if rng.IntN(3) == 0 {
			// An Update of several writes, failing one time in three, with
			// now and then a write on the DB inside it: it commits on its
			// own for a document the Update has not written, and is
			// refused for one it has.
			mm := cloneModel(m)
			fail := rng.IntN(3) == 0
			var names []string
			held := map[string]bool{}
			err := db.Update(func(b *tipkv.Batch) error {
				for range 1 + rng.IntN(4) {
					id := pick()
					if rng.IntN(5) > 0 {
						name, err := op(b, mm, id)
						if err != nil {
							return err
						}
						held[id] = true
						names = append(names, name)
						continue
					}
					if held[id] {
						_, err := users.Put(db, id, user{})
						if !errors.Is(err, tipkv.ErrInvalid) {
							return fmt.Errorf("Put on the DB of %q held by the Update: %v", id, err)
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
		check(t, users, m, step, rng)
	}
}

func versionList(vs map[int64]int) []int64 {
	var out []int64
	for v := range vs {
		out = append(out, v)
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

func cloneModel(m model) model {
	out := model{}
	for id, vs := range m {
		out[id] = maps.Clone(vs)
	}
	return out
}

func check(t *testing.T, users *versioned.Collection[user], m model, step int, rng *rand.Rand) {
	t.Helper()
	var live, ids []string
	for id, vs := range m {
		ids = append(ids, id)
		want := versionList(vs)
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

		hist := collect(t, users.History(id, tipkv.Query{}))
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

		for at := int64(1); at <= m.latest(id)+1; at++ {
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
	for _, d := range collect(t, users.LatestAll(tipkv.Query{})) {
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
