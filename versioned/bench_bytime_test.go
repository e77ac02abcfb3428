package versioned_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/versioned"
)

// The cost curve of AsOfTime without a time index (issue 26): a read at a
// random time among a document's versions is a binary search over them,
// against AsOf of the same version (one seek), paired in one process, for
// histories of 16 to 65,536 versions, one per second, on disk, compacted.
// And with the latest version answering (a time after it): one seek,
// against Latest.
//
//	go test -run '^$' -bench 'BenchmarkAsOfTime' -benchtime 42000x -count 3 ./versioned/
func BenchmarkAsOfTime(b *testing.B) {
	for _, n := range []int{16, 256, 4096, 65536} {
		var c *versioned.Collection[[]byte]
		var t0 time.Time
		build := func() {
			if c == nil {
				c, t0 = timedHistory(b, n)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(n), 26))
		b.Run(fmt.Sprintf("versions=%d/op=asoftime/vs=asof", n), func(sb *testing.B) {
			build()
			var v int64
			paired.Ratio(sb, func() {
				v = 1 + rng.Int64N(int64(n)-1) // not the latest
				d, err := c.AsOfTime("doc", t0.Add(time.Duration(v-1)*time.Second+time.Millisecond))
				if err != nil || d.Version != v {
					sb.Fatalf("AsOfTime: version %d, %v; want %d", d.Version, err, v)
				}
			}, func() {
				if _, err := c.AsOf("doc", 1+rng.Int64N(int64(n)-1)); err != nil {
					sb.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("versions=%d/op=asoftime-latest/vs=latest", n), func(sb *testing.B) {
			build()
			after := t0.Add(time.Duration(n) * time.Second)
			paired.Ratio(sb, func() {
				if _, err := c.AsOfTime("doc", after); err != nil {
					sb.Fatal(err)
				}
			}, func() {
				if _, err := c.Latest("doc"); err != nil {
					sb.Fatal(err)
				}
			})
		})
	}
}

// timedHistory writes n versions of "doc", one a second from the time it
// returns, into a DB on disk, and compacts it.
func timedHistory(b *testing.B, n int) (*versioned.Collection[[]byte], time.Time) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	db, err := tipkv.Open(filepath.Join(b.TempDir(), "db"), &tipkv.Options{NoSync: true, Clock: func() time.Time { return now }})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	c, err := versioned.NewCollection(db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(b, err)
	val := make([]byte, vbValueSize)
	for i := range n {
		now = t0.Add(time.Duration(i) * time.Second)
		_, err := c.Put(db, "doc", val)
		require.NoError(b, err)
	}
	require.NoError(b, db.Compact())
	return c, t0
}
