package codec_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
)

func TestSegmentRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a", "\x00", "\x00\x00", "a\x00b", "\xff", "\x00\xff", "\xff\x00", "doc-1", "doc-10", "\x80\xfe invalid utf-8"} {
		enc := codec.AppendString(nil, s)
		require.Equal(t, enc, codec.AppendBytes(nil, []byte(s)), "string and bytes encode alike")
		got, rest, err := codec.DecodeString(append(enc, 0x42))
		require.NoError(t, err, "%q", s)
		require.Equal(t, s, got)
		require.Equal(t, []byte{0x42}, rest)
		rest, err = codec.SkipSegment(enc)
		require.NoError(t, err)
		require.Empty(t, rest)
	}
}

func TestSegmentNeverPrefixOfAnother(t *testing.T) {
	a := codec.AppendString(nil, "doc-1")
	b := codec.AppendString(nil, "doc-10")
	require.False(t, bytes.HasPrefix(b, a))
	require.Negative(t, bytes.Compare(a, b))
	// "a" against "a\x00": the classic FoundationDB-with-one-byte-terminator trap.
	a = codec.AppendString(nil, "a")
	b = codec.AppendString(nil, "a\x00")
	require.False(t, bytes.HasPrefix(b, a))
}

func TestNumbers(t *testing.T) {
	for _, n := range []int64{math.MinInt64, -2, -1, 0, 1, 2, 1 << 40, math.MaxInt64} {
		got, rest, err := codec.DecodeAsc(codec.AppendAsc(nil, n))
		require.NoError(t, err)
		require.Equal(t, n, got)
		require.Empty(t, rest)
		got, rest, err = codec.DecodeDesc(codec.AppendDesc(nil, n))
		require.NoError(t, err)
		require.Equal(t, n, got)
		require.Empty(t, rest)
	}
	// desc(n) is MaxInt64 - n for n >= 0, as the issue and Java's Long.MAX_VALUE - n give.
	require.Equal(t, []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, codec.AppendDesc(nil, 1))
}

func TestDecodeErrorsAreCorrupt(t *testing.T) {
	for _, in := range [][]byte{nil, {0x61}, {0x61, 0x00}, {0x00, 0x02}} {
		_, _, err := codec.DecodeBytes(in)
		require.ErrorIs(t, err, codec.ErrCorrupt, "%x", in)
		require.ErrorContains(t, err, "at byte")
	}
	_, _, err := codec.DecodeAsc([]byte{1, 2, 3})
	require.ErrorIs(t, err, codec.ErrCorrupt)
	_, _, err = codec.DecodeDesc(nil)
	require.ErrorIs(t, err, codec.ErrCorrupt)
	_, _, err = codec.DecodeFamily(nil)
	require.ErrorIs(t, err, codec.ErrCorrupt)
}

func TestPrefixEnd(t *testing.T) {
	require.Equal(t, []byte{0x01, 0x62}, codec.PrefixEnd([]byte{0x01, 0x61}))
	require.Equal(t, []byte{0x02}, codec.PrefixEnd([]byte{0x01, 0xff, 0xff}))
	require.Nil(t, codec.PrefixEnd([]byte{0xff}))
	require.Nil(t, codec.PrefixEnd(nil))
	p := []byte{0x01, 0x61}
	end := codec.PrefixEnd(p)
	require.Equal(t, []byte{0x01, 0x61}, p, "PrefixEnd must not modify its input")
	require.Positive(t, bytes.Compare(end, append(p, 0xff, 0xff)))
}

func versionKey(coll, id string, v int64) []byte {
	k := codec.AppendFamily(nil, codec.FamilyVersions)
	k = codec.AppendString(k, coll)
	k = codec.AppendString(k, id)
	return codec.AppendDesc(k, v)
}

func TestSplit(t *testing.T) {
	k := versionKey("users", "u1", 3)
	require.Equal(t, len(k)-8, codec.Split(k))
	prefix := k[:len(k)-8]
	require.Equal(t, len(prefix), codec.Split(prefix), "a bare prefix is all prefix")
	end := codec.PrefixEnd(prefix)
	require.Equal(t, len(end), codec.Split(end), "a bound is all prefix")
	// An id whose bytes contain what looks like a terminator and 8 more bytes.
	k2 := versionKey("c", "x\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00", 7)
	require.Equal(t, len(k2)-8, codec.Split(k2))
	q := codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "jobs"), 5)
	require.Equal(t, len(q)-8, codec.Split(q))
	meta := codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "format")
	require.Equal(t, len(meta), codec.Split(meta))
	require.Equal(t, 0, codec.Split(nil))
	require.Equal(t, 3, codec.Split([]byte{0x01, 0x00, 0x00}))
}

// Split reads the family table: for every family, a key of its layout
// splits before its number, or not at all when it has none; a key of a
// reserved family is all prefix.
func TestSplitFollowsTheTable(t *testing.T) {
	numbered := 0
	for _, l := range codec.Families() {
		k := codec.AppendFamily(nil, l.Family)
		for _, seg := range l.Segments {
			k = codec.AppendString(k, seg+"\x00x")
		}
		prefix := len(k)
		if l.Numbered() {
			numbered++
			k = codec.AppendAsc(k, 42)
		}
		require.Equal(t, prefix, codec.Split(k), "%s", l.Name)
	}
	require.Equal(t, 8, numbered, "versions, queue items, feed events, dead letters, once seqs, feed leases, purges and time index entries end in a number")
	for b := 0x0e; b <= 0xff; b++ {
		k := codec.AppendAsc(codec.AppendString([]byte{byte(b)}, "x"), 1)
		require.Equal(t, len(k), codec.Split(k), "reserved family 0x%02x", b)
		_, ok := codec.Family(b).Layout()
		require.False(t, ok)
		require.Equal(t, fmt.Sprintf("0x%02x", b), codec.Family(b).String())
	}
	lo, hi := codec.Keyspace()
	for _, l := range codec.Families() {
		require.Negative(t, bytes.Compare(lo, []byte{byte(l.Family), 0}))
		require.Negative(t, bytes.Compare([]byte{byte(l.Family), 0xff, 0xff}, hi))
	}
}

// The comparer's invariants, checked over many random tipkv keys: Split of a
// bare prefix is its length, ordering by (prefix, suffix) agrees with
// bytes.Compare, and ImmediateSuccessor gives the smallest greater prefix.
func TestComparerInvariants(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	keys := make([][]byte, 0, 4000)
	for range 4000 {
		keys = append(keys, randomKey(rng))
	}
	for _, k := range keys {
		n := codec.Split(k)
		require.LessOrEqual(t, n, len(k))
		p := k[:n]
		require.Equal(t, len(p), codec.Split(p), "Split of a bare prefix %x", p)
		if n < len(k) {
			require.Negative(t, bytes.Compare(p, k), "a bare prefix sorts before its keys")
		}
		succ := codec.ImmediateSuccessor(nil, p)
		require.Equal(t, len(succ), codec.Split(succ), "successor %x of %x is a prefix", succ, p)
		require.Negative(t, bytes.Compare(p, succ))
	}
	for i := 0; i+1 < len(keys); i++ {
		a, b := keys[i], keys[i+1]
		pa, pb := a[:codec.Split(a)], b[:codec.Split(b)]
		want := bytes.Compare(pa, pb)
		if want == 0 {
			want = bytes.Compare(a[len(pa):], b[len(pb):])
		}
		require.Equal(t, want, bytes.Compare(a, b), "prefix-then-suffix order of %x and %x", a, b)
		// No key of another prefix falls between a prefix and its successor.
		if !bytes.Equal(pa, pb) {
			succ := codec.ImmediateSuccessor(nil, pa)
			if bytes.Compare(pa, pb) < 0 {
				require.GreaterOrEqual(t, bytes.Compare(b, succ), 0, "key %x lies between prefix %x and its successor %x", b, pa, succ)
			}
		}
	}
}

func randomKey(rng *rand.Rand) []byte {
	fams := []codec.Family{codec.FamilyVersions, codec.FamilyFeed, codec.FamilyQueueItems, codec.FamilyDeadLetters}
	f := fams[rng.IntN(len(fams))]
	k := codec.AppendFamily(nil, f)
	k = codec.AppendBytes(k, randomBytes(rng, 2))
	if f == codec.FamilyVersions {
		k = codec.AppendBytes(k, randomBytes(rng, 3))
	}
	if f == codec.FamilyQueueItems || f == codec.FamilyDeadLetters {
		return codec.AppendAsc(k, int64(rng.Uint64()))
	}
	return codec.AppendDesc(k, int64(rng.Uint64()))
}

// randomBytes draws from a tiny alphabet full of escape bytes so that keys
// collide on prefixes often.
func randomBytes(rng *rand.Rand, maxLen int) []byte {
	alphabet := []byte{0x00, 0x01, 0x02, 0x61, 0xfe, 0xff}
	b := make([]byte, rng.IntN(maxLen+1))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return b
}

// NextPrefix-style skipping terminates: from every prefix, seeking to its
// successor in a sorted key list moves strictly forward to another prefix.
func TestImmediateSuccessorSkipsWholePrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 0, 2000)
	for range 2000 {
		keys = append(keys, randomKey(rng))
	}
	sortKeys(keys)
	i, steps := 0, 0
	for i < len(keys) {
		p := keys[i][:codec.Split(keys[i])]
		succ := codec.ImmediateSuccessor(nil, p)
		j := i
		for j < len(keys) && bytes.Compare(keys[j], succ) < 0 {
			require.Equal(t, p, keys[j][:codec.Split(keys[j])], "skipped a key of another prefix")
			j++
		}
		require.Greater(t, j, i)
		i = j
		steps++
		require.LessOrEqual(t, steps, len(keys))
	}
}

func sortKeys(keys [][]byte) { slices.SortFunc(keys, bytes.Compare) }
