package memengine_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/examples/memengine"
)

// Random batches of Sets, Deletes and DeleteRanges on a small key space,
// checked against a map after every commit, with snapshots taken along
// the way checked at the end against the map as it was: the tree's
// writes, its order, and that a commit leaves older views alone.
func TestModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	s, err := memengine.New().Open(nil)
	require.NoError(t, err)
	defer s.Close()
	key := func() []byte { return []byte{0x02, byte(rng.IntN(64))} }
	model := map[string]string{}
	type snap struct {
		s    engine.Snapshot
		want map[string]string
	}
	var snaps []snap
	for round := range 2000 {
		b := s.NewBatch()
		for range 1 + rng.IntN(6) {
			switch k := key(); rng.IntN(5) {
			case 0:
				require.NoError(t, b.Delete(k))
				delete(model, string(k))
			case 1:
				hi := []byte{0x02, k[1] + byte(rng.IntN(8))}
				require.NoError(t, b.DeleteRange(k, hi))
				for mk := range model {
					if bytes.Compare(k, []byte(mk)) <= 0 && bytes.Compare([]byte(mk), hi) < 0 {
						delete(model, mk)
					}
				}
			default:
				v := fmt.Sprint(round)
				require.NoError(t, b.Set(k, []byte(v)))
				model[string(k)] = v
			}
		}
		require.NoError(t, b.Apply(true))
		require.NoError(t, b.Close())
		require.Equal(t, model, scanAll(t, s), "round %d (seed %d)", round, seed)
		if round%100 == 0 {
			sn, err := s.NewSnapshot()
			require.NoError(t, err)
			snaps = append(snaps, snap{sn, maps.Clone(model)})
		}
	}
	for i, sn := range snaps {
		require.Equal(t, sn.want, scanAll(t, sn.s), "snapshot %d (seed %d)", i, seed)
		require.NoError(t, sn.s.Close())
	}
}

// scanAll reads every key of the model's space, in order, and checks
// that First/Next and Last agree with the order.
func scanAll(t *testing.T, r engine.Reader) map[string]string {
	t.Helper()
	it, err := r.NewIter([]byte{0x02}, []byte{0x03})
	require.NoError(t, err)
	defer it.Close()
	got := map[string]string{}
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		require.NoError(t, err)
		got[string(it.Key())] = string(v)
		keys = append(keys, string(it.Key()))
	}
	require.NoError(t, it.Error())
	require.True(t, slices.IsSorted(keys), "ascending order")
	if len(keys) > 0 {
		require.True(t, it.Last())
		require.Equal(t, keys[len(keys)-1], string(it.Key()))
	} else {
		require.False(t, it.Last())
	}
	return got
}
