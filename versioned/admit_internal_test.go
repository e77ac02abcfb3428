package versioned

import (
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/stretchr/testify/require"
)

// A document is admitted at its second miss, and forgotten when another
// document's miss takes its slot: the table remembers a bounded number
// of misses, never more.
func TestAdmissionSecondMiss(t *testing.T) {
	a := newAdmission(1)
	require.Len(t, a.slots, admissionMin, "the fewest slots")
	require.Len(t, newAdmission(admissionMin+1).slots, 2*admissionMin, "a power of two")

	x := []byte("x")
	require.False(t, a.second(x), "the first miss is noted")
	require.True(t, a.second(x), "the second is admitted")
	require.True(t, a.second(x), "and the next ones while the slot holds it")

	slot := func(p []byte) uint64 { return maphash.Bytes(a.seed, p) & uint64(len(a.slots)-1) }
	fp := func(p []byte) uint32 { return uint32(maphash.Bytes(a.seed, p)>>32) | 1 }
	var y []byte
	for i := 0; y == nil; i++ {
		if p := []byte(fmt.Sprint("y", i)); slot(p) == slot(x) && fp(p) != fp(x) {
			y = p
		}
	}
	require.False(t, a.second(y), "y's first miss takes x's slot")
	require.False(t, a.second(x), "x is forgotten: a first miss again")
	require.True(t, a.second(x))
}
