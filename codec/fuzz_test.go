package codec_test

import (
	"bytes"
	"cmp"
	"errors"
	"testing"

	"github.com/tipkv/tipkv/codec"
)

// Seeds live in testdata/fuzz/<Target>/ as well as here.
var fuzzSeeds = [][]byte{nil, {0}, {0, 0}, {0, 1}, {0, 0xff}, {0xff}, []byte("doc-1"), []byte("doc-10"), {0x61, 0, 0x62}}

func FuzzSegmentRoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		enc := codec.AppendBytes(nil, b)
		if !bytes.Equal(enc, codec.AppendString(nil, string(b))) {
			t.Fatalf("AppendBytes and AppendString differ for %x", b)
		}
		got, rest, err := codec.DecodeBytes(append(enc, 0x07))
		if err != nil {
			t.Fatalf("decode %x: %v", enc, err)
		}
		if !bytes.Equal(got, b) || !bytes.Equal(rest, []byte{0x07}) {
			t.Fatalf("round trip of %x gave %x rest %x", b, got, rest)
		}
	})
}

func FuzzSegmentOrder(f *testing.F) {
	for i, a := range fuzzSeeds {
		f.Add(a, fuzzSeeds[(i+1)%len(fuzzSeeds)])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ea, eb := codec.AppendBytes(nil, a), codec.AppendBytes(nil, b)
		if got, want := bytes.Compare(ea, eb), bytes.Compare(a, b); got != want {
			t.Fatalf("order of %x, %x is %d; encoded %d", a, b, want, got)
		}
		if !bytes.Equal(a, b) && (bytes.HasPrefix(eb, ea) || bytes.HasPrefix(ea, eb)) {
			t.Fatalf("encoding of %x and %x: one is a prefix of the other", a, b)
		}
	})
}

func FuzzNumberOrder(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(int64(-1), int64(0))
	f.Add(int64(-1<<63), int64(1<<63-1))
	f.Fuzz(func(t *testing.T, a, b int64) {
		want := cmp.Compare(a, b)
		if got := bytes.Compare(codec.AppendAsc(nil, a), codec.AppendAsc(nil, b)); got != want {
			t.Fatalf("asc order of %d, %d: %d, want %d", a, b, got, want)
		}
		if got := bytes.Compare(codec.AppendDesc(nil, a), codec.AppendDesc(nil, b)); got != -want {
			t.Fatalf("desc order of %d, %d: %d, want %d", a, b, got, -want)
		}
		for _, dec := range []struct {
			enc func([]byte, int64) []byte
			dec func([]byte) (int64, []byte, error)
		}{{codec.AppendAsc, codec.DecodeAsc}, {codec.AppendDesc, codec.DecodeDesc}} {
			n, rest, err := dec.dec(dec.enc(nil, a))
			if err != nil || n != a || len(rest) != 0 {
				t.Fatalf("round trip of %d: %d %x %v", a, n, rest, err)
			}
		}
	})
}

// Multi-part keys of the versions family order like (collection, id,
// version descending) tuples, and Split finds their prefix.
func FuzzKeyOrder(f *testing.F) {
	f.Add([]byte("c"), []byte("doc-1"), int64(1), []byte("c"), []byte("doc-10"), int64(2))
	f.Add([]byte("c"), []byte("a"), int64(5), []byte("c"), []byte("a\x00"), int64(-1))
	f.Add([]byte(""), []byte{0xff}, int64(-1<<63), []byte{0}, []byte(""), int64(0))
	f.Fuzz(func(t *testing.T, c1, id1 []byte, v1 int64, c2, id2 []byte, v2 int64) {
		k1, k2 := vkey(c1, id1, v1), vkey(c2, id2, v2)
		want := bytes.Compare(c1, c2)
		if want == 0 {
			want = bytes.Compare(id1, id2)
		}
		if want == 0 {
			want = -cmp.Compare(v1, v2)
		}
		if got := bytes.Compare(k1, k2); got != want {
			t.Fatalf("order of (%x,%x,%d) and (%x,%x,%d): %d, want %d", c1, id1, v1, c2, id2, v2, got, want)
		}
		if n := codec.Split(k1); n != len(k1)-codec.NumberSize {
			t.Fatalf("Split(%x) = %d, want %d", k1, n, len(k1)-codec.NumberSize)
		}
	})
}

func vkey(c, id []byte, v int64) []byte {
	k := codec.AppendFamily(nil, codec.FamilyVersions)
	k = codec.AppendBytes(k, c)
	k = codec.AppendBytes(k, id)
	return codec.AppendDesc(k, v)
}

// Decoding arbitrary bytes never panics, and what decodes re-encodes to the
// bytes it consumed (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add(vkey([]byte("users"), []byte("alice"), 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		if v, rest, err := codec.DecodeBytes(data); err == nil {
			consumed := data[:len(data)-len(rest)]
			if !bytes.Equal(codec.AppendBytes(nil, v), consumed) {
				t.Fatalf("%x decodes to %x, which encodes to something else", consumed, v)
			}
		}
		_, _ = codec.SkipSegment(data)
		_, _, _ = codec.DecodeAsc(data)
		_, _, _ = codec.DecodeDesc(data)
		_, _, _ = codec.DecodeFamily(data)
		n := codec.Split(data)
		if n < 0 || n > len(data) {
			t.Fatalf("Split(%x) = %d", data, n)
		}
		p := data[:n]
		if s := codec.ImmediateSuccessor(nil, p); bytes.Compare(s, p) <= 0 {
			t.Fatalf("ImmediateSuccessor(%x) = %x is not greater", p, s)
		}
		_ = codec.PrefixEnd(data)
	})
}

// For any two byte strings, ordering by Split's prefix first and the rest
// second agrees with bytes.Compare: the property Pebble's comparer needs,
// kept even for keys tipkv did not write.
func FuzzSplitOrder(f *testing.F) {
	f.Add(vkey([]byte("c"), []byte("a"), 1), append(vkey([]byte("c"), []byte("a"), 0)[:9], 0x7f, 0xff))
	f.Add([]byte{1, 'c', 0, 1, 'b', 0, 7}, vkey([]byte("c"), []byte("b"), 3))
	f.Add([]byte{1, 'c', 0, 1, 'z'}, vkey([]byte("c"), []byte("z"), 3))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		pa, pb := a[:codec.Split(a)], b[:codec.Split(b)]
		want := bytes.Compare(pa, pb)
		if want == 0 {
			want = bytes.Compare(a[len(pa):], b[len(pb):])
		}
		if got := bytes.Compare(a, b); got != want {
			t.Fatalf("%x vs %x: bytes.Compare %d, prefix-then-suffix %d", a, b, got, want)
		}
	})
}

// Any bytes decode into a struct or fail with ErrCorrupt; never a panic.
func FuzzValueDecode(f *testing.F) {
	type doc struct {
		ID    string            `json:"id"`
		N     int               `msgpack:"n"`
		Tags  []string          `json:"tags"`
		Attrs map[string]any    `json:"attrs"`
		Inner *struct{ X bool } `json:"inner"`
	}
	seed, _ := codec.Msgpack[doc]{}.Append(nil, doc{ID: "a", N: 1, Tags: []string{"x"}})
	f.Add(seed)
	f.Add([]byte(`{"id":"a","n":1,"tags":["x"]}`))
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []codec.Value[doc]{codec.Msgpack[doc]{}, codec.Msgpack[doc]{IgnoreJSONTags: true}, codec.JSON[doc]{}} {
			var v doc
			if err := c.Decode(b, &v); err != nil && !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("%T: %v does not match ErrCorrupt", c, err)
			}
		}
	})
}
