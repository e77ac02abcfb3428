package versioned_test

import (
	"errors"
	"flag"
	"fmt"
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
// versions and their values.
type model map[string]map[int64]int

func (m model) latest(id string) int64 {
	var l int64
	for v := range m[id] {
		l = max(l, v)
	}
	return l
}

// next is the version a Put gets: versions are dense from the oldest
// surviving one, and a deleted document starts again at 1.
func (m model) next(id string) int64 { return m.latest(id) + 1 }

// TestModel runs random writes (alone and in Updates that may fail)
// against a collection and a model, and checks every read against the
// model. Rerun a failure with -model.seed.
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

	// op applies one random write to w and, when it succeeds, to mm.
	op := func(w tipkv.Writer, mm model) (string, error) {
		id := ids[rng.IntN(len(ids))]
		if mm[id] == nil {
			mm[id] = map[int64]int{}
		}
		counter++
		switch r := rng.IntN(20); {
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
			if rng.IntN(3) == 0 {
				exp += int64(rng.IntN(3)) - 1
				exp = max(exp, 0)
			}
			v, err := users.PutIf(w, id, user{Age: counter}, exp)
			if exp != mm.latest(id) {
				if !errors.Is(err, tipkv.ErrConflict) {
					return "", fmt.Errorf("PutIf %q expected %d, latest %d: %v", id, exp, mm.latest(id), err)
				}
				return "PutIf(conflict)", nil
			}
			if err == nil {
				mm[id][v] = counter
			}
			return fmt.Sprintf("PutIf(%q, %d)", id, exp), err
		case r < 16:
			keep := 1 + rng.IntN(4)
			_, err := users.Prune(w, id, keep)
			if err == nil {
				vs := versionList(mm[id])
				for i, v := range vs {
					if i >= keep {
						delete(mm[id], v)
					}
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
		default:
			err := users.Delete(w, id)
			if err == nil {
				clear(mm[id])
			}
			return fmt.Sprintf("Delete(%q)", id), err
		}
	}

	boom := errors.New("boom")
	for step := range 400 {
		if rng.IntN(3) == 0 {
			// An Update of several writes, failing one time in three.
			mm := cloneModel(m)
			fail := rng.IntN(3) == 0
			var names []string
			err := db.Update(func(b *tipkv.Batch) error {
				for range 1 + rng.IntN(4) {
					name, err := op(b, mm)
					if err != nil {
						return err
					}
					names = append(names, name)
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
			name, err := op(db, m)
			require.NoError(t, err, "step %d: %s", step, name)
		}
		check(t, users, m, step)
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
		out[id] = map[int64]int{}
		for v, x := range vs {
			out[id][v] = x
		}
	}
	return out
}

func check(t *testing.T, users *versioned.Collection[user], m model, step int) {
	t.Helper()
	var present []string
	for id, vs := range m {
		want := versionList(vs)
		d, err := users.Latest(id)
		if len(want) == 0 {
			require.ErrorIs(t, err, tipkv.ErrNotFound, "step %d: Latest(%q)", step, id)
		} else {
			present = append(present, id)
			require.NoError(t, err, "step %d", step)
			require.Equal(t, want[0], d.Version, "step %d: Latest(%q)", step, id)
			require.Equal(t, vs[want[0]], d.Value.Age, "step %d: Latest(%q)", step, id)
		}
		hist := collect(t, users.History(id, tipkv.Query{}))
		require.Equal(t, want, versionsOf(hist), "step %d: History(%q)", step, id)
		for _, h := range hist {
			require.Equal(t, vs[h.Version], h.Value.Age, "step %d: %q v%d", step, id, h.Version)
		}
		for at := int64(1); at <= m.latest(id)+1; at++ {
			d, err := users.AsOf(id, at)
			i := slices.IndexFunc(want, func(v int64) bool { return v <= at })
			if i < 0 {
				require.ErrorIs(t, err, tipkv.ErrNotFound, "step %d: AsOf(%q, %d)", step, id, at)
				continue
			}
			require.NoError(t, err)
			require.Equal(t, want[i], d.Version, "step %d: AsOf(%q, %d)", step, id, at)
		}
	}
	slices.Sort(present)
	var got []string
	for _, d := range collect(t, users.LatestAll(tipkv.Query{})) {
		got = append(got, d.ID)
		require.Equal(t, m.latest(d.ID), d.Version, "step %d: LatestAll %q", step, d.ID)
	}
	require.Equal(t, present, got, "step %d: LatestAll ids", step)
}
