package sqlkv

import (
	"bytes"
	"fmt"
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
	require.Equal(t, "k036a6f62730001", s.payload(many), "a key written many times is named once")

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
	h.dispatch("f03")
	require.Len(t, in.ch, 1, "a family names every watch in it")
	require.Len(t, out.ch, 1)
	<-in.ch
	<-out.ch
	h.dispatch("f02")
	require.Len(t, in.ch, 0)
	require.Len(t, out.ch, 0)
	h.dispatch("x-from-a-newer-version")
	require.Len(t, in.ch, 1)
	require.Len(t, out.ch, 1)
}

// A batch that writes many keys of notified families sends one
// notification of bounded size: a range per family covering its writes,
// or the families alone when even that is too long; each still wakes the
// watches of what was written, and no other family's.
func TestPayloadBounded(t *testing.T) {
	s := &Store{}
	for _, f := range []codec.Family{codec.FamilyVersions, codec.FamilyQueueState, codec.FamilyFeed} {
		s.notify[f] = true
	}
	docKey := func(id string) []byte {
		return codec.AppendDesc(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "orders"), id), 1)
	}
	state := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "outbox")
	var ops []op
	for i := range 500 { // an outbox Update: 500 documents, their events, the tail
		ops = append(ops, op{kind: opSet, k: docKey(fmt.Sprintf("o-%03d", i))}, op{kind: opSet, k: qk("outbox", int64(i))})
	}
	ops = append(ops, op{kind: opSet, k: state})
	p := s.payload(ops)
	require.LessOrEqual(t, len(p), 2*listBudget)
	require.Equal(t, 2, strings.Count(p, ",")+1, "one range per family: %s", p)

	h := newHub(s)
	watch := func(lo, hi []byte) *watcher {
		w := &watcher{lo: lo, hi: hi, ch: make(chan struct{}, 1)}
		h.watchers[w] = struct{}{}
		return w
	}
	first := watch(docKey("o-000"), codec.PrefixEnd(docKey("o-000")))
	last := watch(docKey("o-499"), codec.PrefixEnd(docKey("o-499")))
	tail := watch(state, codec.PrefixEnd(state))
	other := watch(docKey("p-1"), codec.PrefixEnd(docKey("p-1")))
	feed := watch([]byte{0x04}, []byte{0x05})
	h.dispatch(p)
	require.Len(t, first.ch, 1)
	require.Len(t, last.ch, 1)
	require.Len(t, tail.ch, 1)
	require.Len(t, other.ch, 0, "outside the range of the batch's documents")
	require.Len(t, feed.ch, 0, "a family the batch did not write")
	<-first.ch
	<-last.ch
	<-tail.ch

	// Keys too long for even one range a family: the families alone.
	long := func(c byte) []byte {
		return append(codec.AppendFamily(nil, codec.FamilyFeed), bytes.Repeat([]byte{c}, 600)...)
	}
	p = s.payload([]op{{kind: opSet, k: long('a')}, {kind: opSet, k: long('z')}, {kind: opSet, k: state}})
	require.Equal(t, "f04,f03", p)
	h.dispatch(p)
	require.Len(t, feed.ch, 1)
	require.Len(t, tail.ch, 1)
	require.Len(t, first.ch, 0)
}
