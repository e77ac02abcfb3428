package sqlkv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
)

func qk(name string, seq int64) []byte {
	return codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name), seq)
}

// The guard's prefix of a range is codec.Split's prefix of every key a
// writer could put in the range, or there is none.
func TestRangePrefix(t *testing.T) {
	qp := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "p")
	coll := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c")
	d := codec.AppendString(bytes.Clone(coll), "doc")
	state := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "p")
	cases := []struct {
		lo, hi []byte
		want   []byte
	}{
		{qp, codec.PrefixEnd(qp), qp},
		{qk("p", 5), qk("p", 9), qp},
		{d, codec.PrefixEnd(d), d},
		{codec.AppendDesc(bytes.Clone(d), 9), codec.AppendDesc(bytes.Clone(d), 1), d},
		{qp, codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q"), nil}, // wider
		{coll, codec.PrefixEnd(coll), nil},                                                  // a collection: many documents
		{state, codec.PrefixEnd(state), nil},                                                // an unnumbered family
		{[]byte{0x02}, []byte{0x03}, nil},
	}
	for _, tc := range cases {
		got, ok := rangePrefix(tc.lo, tc.hi)
		require.Equal(t, tc.want != nil, ok, "[%x, %x)", tc.lo, tc.hi)
		require.Equal(t, tc.want, got)
		if !ok {
			continue
		}
		// Every key a writer could put in the range takes the same lock.
		for _, k := range [][]byte{tc.lo, append(bytes.Clone(tc.lo), 0), append(bytes.Clone(got), 0xff, 0xff), codec.AppendAsc(bytes.Clone(got), 7)} {
			if bytes.Compare(k, tc.lo) < 0 || bytes.Compare(k, tc.hi) >= 0 {
				continue
			}
			p, ok := keyPrefix(k)
			require.True(t, ok)
			require.Equal(t, got, p, "key %x", k)
		}
	}
}

func TestPayloadAndDispatch(t *testing.T) {
	s := &Store{}
	s.notify[codec.FamilyQueueState] = true
	state := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "jobs")
	require.Empty(t, s.payload([]op{{kind: opSet, k: qk("jobs", 1)}}), "queue items do not notify")
	p := s.payload([]op{{kind: opSet, k: qk("jobs", 1)}, {kind: opSet, k: state}})
	require.Equal(t, "k"+strings.ToLower("036a6f62730001"), p)
	p = s.payload([]op{{kind: opDeleteRange, k: []byte{0x02}, end: []byte{0x04}}})
	require.Equal(t, "r02-04", p)
	require.Empty(t, s.payload([]op{{kind: opDeleteRange, k: []byte{0x04}, end: []byte{0x05}}}))
	var many []op
	for range 1000 {
		many = append(many, op{kind: opSet, k: state})
	}
	require.Equal(t, "*", s.payload(many))

	h := newHub(s)
	in := &watcher{lo: state, hi: codec.PrefixEnd(state), ch: make(chan struct{}, 1)}
	out := &watcher{lo: codec.PrefixEnd(state), hi: []byte{0x04}, ch: make(chan struct{}, 1)}
	h.watchers[in], h.watchers[out] = struct{}{}, struct{}{}
	h.dispatch("k036a6f62730001")
	require.Len(t, in.ch, 1)
	require.Len(t, out.ch, 0)
	<-in.ch
	h.dispatch("r03-04")
	require.Len(t, in.ch, 1)
	require.Len(t, out.ch, 1)
	<-in.ch
	<-out.ch
	h.dispatch("x-from-a-newer-version")
	require.Len(t, in.ch, 1)
	require.Len(t, out.ch, 1)
}
