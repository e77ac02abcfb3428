package codec_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
)

func appendVersionKey(dst []byte, coll, id string, v int64) []byte {
	dst = codec.AppendFamily(dst, codec.FamilyVersions)
	dst = codec.AppendString(dst, coll)
	dst = codec.AppendString(dst, id)
	return codec.AppendDesc(dst, v)
}

// Encoding into a buffer with room allocates nothing.
func TestEncodeAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		buf = appendVersionKey(buf[:0], "users", "a\x00lice", 42)
		buf = codec.AppendAsc(buf, 7)
	})
	require.Zero(t, allocs)
}

func BenchmarkKey(b *testing.B) {
	// The baseline: the same bytes appended with no escaping or terminators,
	// the least any key encoder could do.
	b.Run("op=encode,key=version,baseline=plain-append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = append(buf[:0], byte(codec.FamilyVersions))
			buf = append(buf, "users"...)
			buf = append(buf, "user-000123"...)
			buf = binary.BigEndian.AppendUint64(buf, 42)
		}
	})
	b.Run("op=encode,key=version", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = appendVersionKey(buf[:0], "users", "user-000123", 42)
		}
	})
	b.Run("op=encode,key=version,escapes=2", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = appendVersionKey(buf[:0], "us\x00ers", "user\x00000123", 42)
		}
	})
	b.Run("op=split,key=version", func(b *testing.B) {
		b.ReportAllocs()
		k := appendVersionKey(nil, "users", "user-000123", 42)
		for b.Loop() {
			if codec.Split(k) != len(k)-8 {
				b.Fatal("bad split")
			}
		}
	})
	b.Run("op=decode,key=version", func(b *testing.B) {
		b.ReportAllocs()
		k := appendVersionKey(nil, "users", "user-000123", 42)
		for b.Loop() {
			rest, err := codec.SkipSegment(k[1:])
			if err != nil {
				b.Fatal(err)
			}
			if rest, err = codec.SkipSegment(rest); err != nil {
				b.Fatal(err)
			}
			if v, _, err := codec.DecodeDesc(rest); err != nil || v != 42 {
				b.Fatal(v, err)
			}
		}
	})
}
