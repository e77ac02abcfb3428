package pebblestore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/stretchr/testify/require"
)

// manifestLike writes n records of varied sizes in Pebble's record format,
// some spanning blocks.
func manifestLike(t testing.TB, n int) []byte {
	var buf bytes.Buffer
	w := record.NewWriter(&buf)
	for i := range n {
		rec := bytes.Repeat([]byte(fmt.Sprint(i)), 10+(i*977)%9000)
		_, err := w.WriteRecord(rec)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestDamagedAt(t *testing.T) {
	b := manifestLike(t, 40)
	require.Greater(t, len(b), 3*recordBlock)
	require.Equal(t, -1, damagedAt(b), "a whole file")
	for _, cut := range []int{len(b) - 1, len(b) - 100, len(b) / 2, 7, 1} {
		require.Equal(t, -1, damagedAt(b[:cut]), "torn at %d: a tear, not damage", cut)
	}
	for _, at := range []int{3, 100, recordBlock + 5, 2*recordBlock - 3, len(b) / 2} {
		c := bytes.Clone(b)
		c[at] ^= 0x40
		require.GreaterOrEqual(t, damagedAt(c), 0, "a byte flipped at %d, with records after it", at)
	}
	// The last chunk damaged, nothing valid after it: indistinguishable from
	// a torn write, so not reported.
	c := bytes.Clone(b)
	c[len(c)-2] ^= 0x40
	require.Equal(t, -1, damagedAt(c))
}

// FuzzDamagedAt: any bytes give an answer, never a panic, and a prefix of
// a whole manifest is never called damaged.
func FuzzDamagedAt(f *testing.F) {
	b := manifestLike(f, 8)
	f.Add(b, uint16(0), byte(0))
	f.Add(b, uint16(100), byte(1))
	f.Add([]byte{}, uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, flip byte) {
		_ = damagedAt(data)
		if int(cut) <= len(b) {
			if got := damagedAt(b[:cut]); got != -1 {
				t.Fatalf("a prefix of %d bytes of a whole manifest is called damaged at %d", cut, got)
			}
		}
	})
}
