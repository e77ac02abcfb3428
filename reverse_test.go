package tipkv_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

func ExampleReverse() {
	r := tipkv.Reverse(1)
	fmt.Println(r)
	fmt.Printf("%x\n", tipkv.AppendReversed(nil, 1))
	fmt.Println(tipkv.Unreverse(r))
	// Output:
	// 9223372036854775806
	// 7ffffffffffffffe
	// 1
}

func TestReverse(t *testing.T) {
	for _, n := range []int64{0, 1, 2, 1 << 40, math.MaxInt64, -1, math.MinInt64} {
		require.Equal(t, n, tipkv.Unreverse(tipkv.Reverse(n)))
		require.Equal(t, binary.BigEndian.AppendUint64(nil, tipkv.Reverse(n)), tipkv.AppendReversed(nil, n))
		if n >= 0 {
			require.Equal(t, uint64(math.MaxInt64-n), tipkv.Reverse(n), "MaxInt64 - n for n >= 0")
		}
	}
	// Larger numbers sort first, negative ones after all the others.
	order := []int64{math.MaxInt64, 2, 1, 0, -1, -2, math.MinInt64}
	for i := 0; i+1 < len(order); i++ {
		a, b := tipkv.AppendReversed(nil, order[i]), tipkv.AppendReversed(nil, order[i+1])
		require.Negative(t, bytes.Compare(a, b), "%d before %d", order[i], order[i+1])
	}
}
