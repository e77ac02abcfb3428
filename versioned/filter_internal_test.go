package versioned

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The filter has no false negative, and at capacity (10 bits a document)
// about 1% false positives; below it, fewer. Its size is what the option's
// doc states.
func TestMissFilterRates(t *testing.T) {
	const n = 100_000
	for _, fill := range []int64{n, n / 2} {
		t.Run(fmt.Sprint("fill=", fill), func(t *testing.T) {
			f := newMissFilter(n)
			require.Equal(t, int64(n), f.cap)
			require.InDelta(t, 10.0, float64(len(f.words)*64)/n, 0.01, "bits per document at capacity")
			for i := range fill {
				f.add(docHash(fmt.Appendf(nil, "present-%d", i)))
			}
			for i := range fill {
				require.True(t, f.has(docHash(fmt.Appendf(nil, "present-%d", i))), "a false negative")
			}
			fp := 0
			for i := range n {
				if f.has(docHash(fmt.Appendf(nil, "absent-%d", i))) {
					fp++
				}
			}
			rate := float64(fp) / n
			t.Logf("fill %d/%d: %.2f%% false positives", fill, n, 100*rate)
			limit := 0.02
			if fill < n {
				limit = 0.003
			}
			require.Less(t, rate, limit)
			require.LessOrEqual(t, f.added.Load(), fill, "added counts fresh documents only")
		})
	}
}
