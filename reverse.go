package tipkv

import (
	"math"

	"github.com/tipkv/tipkv/codec"
)

// Reverse returns the reversed form of n that tipkv writes into keys, so
// that larger numbers sort first: MaxInt64 - n for n >= 0. Version 1 becomes
// 9223372036854775806 (0x7ffffffffffffffe), the same number Java's
// Long.MAX_VALUE - 1 gives. It is n XOR MaxInt64, which also keeps negative
// numbers in descending order, after all the others, when the result is
// written as 8 unsigned big-endian bytes. Reverse is its own inverse.
func Reverse(n int64) uint64 { return uint64(n) ^ math.MaxInt64 }

// Unreverse returns the number whose reversed form is r.
func Unreverse(r uint64) int64 { return int64(r ^ math.MaxInt64) }

// AppendReversed appends Reverse(n) to dst as 8 big-endian bytes: the key
// suffix tipkv writes for version or position n.
func AppendReversed(dst []byte, n int64) []byte { return codec.AppendDesc(dst, n) }
