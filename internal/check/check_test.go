package check_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/internal/testutil"
)

func vkey(coll, id string, v int64) []byte {
	return codec.AppendDesc(codec.AppendString(codec.AppendString([]byte{0x01}, coll), id), v)
}

// lkey is the key of a consumer group's lease (family 0x0A).
func lkey(stream, group string, epoch int64) []byte {
	return codec.AppendAsc(codec.AppendString(codec.AppendString([]byte{0x0a}, stream), group), epoch)
}

func qkey(fam byte, q string, seq int64) []byte {
	return codec.AppendAsc(codec.AppendString([]byte{fam}, q), seq)
}

func item() []byte {
	return append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{}), 0x01)
}

// store returns a DB holding a healthy sample and a function that writes
// raw keys into it.
func store(t *testing.T) (engine.Store, func(kv ...[]byte)) {
	db := testutil.OpenMem(t)
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	set := func(kv ...[]byte) {
		b := s.NewBatch()
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				require.NoError(t, b.Delete(kv[i]))
			} else {
				require.NoError(t, b.Set(kv[i], kv[i+1]))
			}
		}
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
	}
	set(vkey("c", "a", 1), []byte{0x01}, vkey("c", "a", 2), []byte{0x02}, vkey("c", "a", 3), []byte{docfmt.DeleteMarker},
		vkey("c", "b", 7), []byte{0xc0}, // pruned below 7: fine
		codec.AppendDesc(codec.AppendString([]byte{0x04}, "s"), 5), []byte(`{"x":1}`),
		codec.AppendDesc(codec.AppendString([]byte{0x04}, "s"), 0), codec.AppendAsc(nil, 9), // its trim mark: no event
		codec.AppendDesc(codec.AppendString([]byte{0x0b}, "c"), 5), []byte{}, // a purge horizon
		qkey(0x02, "q", 3), item(), qkey(0x02, "q", 4), append(queuefmt.AppendHeader(nil, queuefmt.LeasedFormat, queuefmt.Header{At: 1, Headers: queuefmt.AppendPair(nil, "traceparent", "00-1-2-01")}), 0x01), // leased on a shared engine, with headers
		codec.AppendString([]byte{0x03}, "q"), queuefmt.AppendState(nil, queuefmt.State{Head: 3, Tail: 5, Counted: true, Count: 2, CountTo: 5}),
		qkey(0x05, "q", 2), append(queuefmt.AppendHeader(nil, queuefmt.DeadFormat, queuefmt.Header{}), 0x01),
		codec.AppendString([]byte{0x0c}, "q"), queuefmt.AppendControl(nil, queuefmt.Control{Paused: true, MaxInFlight: 2}))
	return s, set
}

func TestHealthy(t *testing.T) {
	s, _ := store(t)
	r := check.Store(s, check.Options{Values: true, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, r.Err())
	require.EqualValues(t, 2, r.Documents)
	require.EqualValues(t, 1, r.Events)
	require.EqualValues(t, 3, r.Messages)
}

// A run state (tag 0x03) counts the messages consumed since it was written
// (the numbers from its head to the first message, 1 and 2 here) as live:
// the check takes them off.
func TestHealthyRun(t *testing.T) {
	s, set := store(t)
	set(codec.AppendString([]byte{0x03}, "q"), queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 5, Counted: true, Count: 4, CountTo: 5, Run: true}))
	require.NoError(t, check.Store(s, check.Options{Values: true, FormatVersion: tipkv.FormatVersion}).Err())
}

// Each broken invariant is found and named.
func TestProblems(t *testing.T) {
	cases := []struct {
		name   string
		kv     [][]byte
		kind   string
		detail string
	}{
		{"a version gap", [][]byte{vkey("c", "a", 2), nil}, "versions", "versions 3 then 1: 2 missing"},
		{"a message below the head", [][]byte{qkey(0x02, "q", 1), item()}, "queue", "below the queue's head 3"},
		{"a message that is a dead letter too", [][]byte{qkey(0x05, "q", 4), append(queuefmt.AppendHeader(nil, queuefmt.DeadFormat, queuefmt.Header{}), 1)}, "queue", "both a message and a dead letter"},
		{"a wrong count", [][]byte{codec.AppendString([]byte{0x03}, "q"), queuefmt.AppendState(nil, queuefmt.State{Head: 3, Tail: 5, Counted: true, Count: 1, CountTo: 5})}, "queue", "counts 1 messages below 5, the queue holds 2"},
		{"a wrong count after a run", [][]byte{codec.AppendString([]byte{0x03}, "q"), queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 5, Counted: true, Count: 3, CountTo: 5, Run: true})}, "queue", "counts 3 messages below 5 (1 without the run consumed since), the queue holds 2"},
		{"head past tail", [][]byte{codec.AppendString([]byte{0x03}, "q"), queuefmt.AppendState(nil, queuefmt.State{Head: 9, Tail: 5})}, "queue", "head 9 is past tail 5"},
		{"an unknown family", [][]byte{{0x0e, 0x01}, {0x01}}, "key", "unknown family 0x0e"},
		{"a control value with an unknown flag", [][]byte{codec.AppendString([]byte{0x0c}, "q"), {0x01, 0x04, 0x00}}, "value", "queue control: "},
		{"a control key with bytes after the name", [][]byte{codec.AppendAsc(codec.AppendString([]byte{0x0c}, "q"), 1), queuefmt.AppendControl(nil, queuefmt.Control{})}, "key", "8 bytes after the queue name"},
		{"the last reserved family", [][]byte{{0xfe}, {0x01}}, "key", "unknown family 0xfe"},
		{"family 0xff, never one", [][]byte{append(bytes.Repeat([]byte{0xff}, 63), 0x01), {0x01}}, "key", "unknown family 0xff"},
		{"a bad name segment", [][]byte{{0x01, 'c'}, {0x01}}, "key", "bad collection segment"},
		{"a short number", [][]byte{append(codec.AppendString([]byte{0x04}, "s"), 1, 2), {0x01}}, "key", "a position needs 8 bytes"},
		{"a bad item header", [][]byte{qkey(0x02, "q", 4), {0x07}}, "value", "tag"},
		{"a value neither msgpack nor JSON", [][]byte{vkey("c", "a", 2), {0xc1, 0xc1}}, "value", "not msgpack"},
		{"no format key", [][]byte{codec.AppendString([]byte{0x00}, "format"), nil}, "format", "no format key"},
		{"a newer format", [][]byte{codec.AppendString([]byte{0x00}, "format"), []byte("99")}, "format", "newer"},
		{"a C1 value format 3 never writes", [][]byte{vkey("c", "a", 2), {0xc1, 0x02}}, "value", "upgraded to format 3 without escaping it"},
		{"metadata that does not decode", [][]byte{vkey("c", "a", 2), append(docfmt.AppendVersion(nil, 5, false, 0, []byte{0x01, 0x09}), 0xc0)}, "value", "its metadata does not decode"},
		{"message metadata that does not decode", [][]byte{qkey(0x02, "q", 4), append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Meta: []byte{0x01, 0x09}}), 0xc0)}, "value", "queue message metadata"},
		{"a truncated version header", [][]byte{vkey("c", "a", 2), {0xc1, 0x10, 0, 0, 0}}, "value", "no version header"},
		{"a lease of epoch 0", [][]byte{lkey("s", "g", 0), append(codec.AppendAsc(nil, 5), 'm')}, "key", "epoch 0 is below 1"},
		{"a lease with no member", [][]byte{lkey("s", "g", 1), codec.AppendAsc(nil, 5)}, "value", "lease of 8 bytes"},
		{"an event value in no form the format writes", [][]byte{codec.AppendDesc(codec.AppendString([]byte{0x04}, "s"), 6), {0xc1, 0x07}}, "value", "an event value that starts with C1"},
		{"event metadata that does not decode", [][]byte{codec.AppendDesc(codec.AppendString([]byte{0x04}, "s"), 6), docfmt.AppendEvent(nil, []byte{0x01, 0x09}, []byte{0xc0})}, "value", "event metadata does not decode"},
		{"a trim mark of 4 bytes", [][]byte{codec.AppendDesc(codec.AppendString([]byte{0x04}, "s"), 0), {0, 0, 0, 9}}, "value", "trim mark of 4 bytes"},
		{"a trim mark at position 0", [][]byte{codec.AppendDesc(codec.AppendString([]byte{0x04}, "s"), 0), codec.AppendAsc(nil, 0)}, "value", "trim mark 0"},
		{"a purge horizon with a value", [][]byte{codec.AppendDesc(codec.AppendString([]byte{0x0b}, "c"), 5), {0x01}}, "value", "purge horizon with a 1-byte value"},
		{"a purge horizon at time 0", [][]byte{codec.AppendDesc(codec.AppendString([]byte{0x0b}, "c"), 0), {}}, "key", "time 0 is below 1"},
		{"two leases of one group", [][]byte{lkey("s", "g", 1), append(codec.AppendAsc(nil, 5), 'm'), lkey("s", "g", 2), append(codec.AppendAsc(nil, 5), 'n')}, "key", "a second lease key"},
		{"an unfinished upgrade", [][]byte{codec.AppendString([]byte{0x00}, "upgrade"), []byte("2 01")}, "format", "upgrade of the store's format is unfinished"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, set := store(t)
			set(c.kv...)
			r := check.Store(s, check.Options{Values: true, FormatVersion: tipkv.FormatVersion})
			require.False(t, r.Healthy())
			found := false
			for _, p := range r.Problems {
				found = found || p.Kind == c.kind && strings.Contains(p.Detail, c.detail)
			}
			require.True(t, found, "want a %s problem saying %q, got %v", c.kind, c.detail, r.Problems)
		})
	}
}

// The ranges check reads are every family of codec's table, once, in key
// order, and the keys of no family between and after them: together,
// without gap or overlap, the whole keyspace.
func TestRanges(t *testing.T) {
	rs := check.Ranges()
	lo, hi := codec.Keyspace()
	require.Equal(t, lo, rs[0].Lo)
	require.Equal(t, hi, rs[len(rs)-1].Hi)
	var names []string
	for i, r := range rs {
		require.Negative(t, bytes.Compare(r.Lo, r.Hi), r.Name)
		if i > 0 {
			require.Equal(t, rs[i-1].Hi, r.Lo, "no gap, no overlap before %s", r.Name)
		}
		if r.Known {
			require.Equal(t, r.Family.String(), r.Name)
			require.Equal(t, []byte{byte(r.Family)}, r.Lo)
		}
		names = append(names, r.Name)
	}
	var want []string
	next := codec.FamilyMeta
	for _, l := range codec.Families() {
		if l.Family != next {
			want = append(want, "other") // reserved families between
		}
		want, next = append(want, l.Name), l.Family+1
	}
	require.Equal(t, append(want, "other"), names)
}

// Raw names skip the value check; Max bounds the list, not the count.
func TestOptions(t *testing.T) {
	s, set := store(t)
	set(vkey("c", "a", 2), []byte{0xd4}, vkey("c", "a", 1), []byte{0xd4})
	require.True(t, check.Store(s, check.Options{Values: true, Raw: map[string]bool{"c": true}}).Healthy())
	r := check.Store(s, check.Options{Values: true, Max: 1})
	require.Equal(t, 2, r.Count)
	require.Len(t, r.Problems, 1)
	require.True(t, check.Store(s, check.Options{}).Healthy(), "values are not checked unless asked")
}

// A store of format 2 (opened read-only, not upgraded) is checked by its
// own rules: a value starting with C1 is a document there.
func TestOlderFormat(t *testing.T) {
	s, set := store(t)
	set(codec.AppendString([]byte{0x00}, "format"), []byte("2"),
		vkey("c", "a", 2), []byte{0xc1, 0x02}, vkey("c", "a", 1), []byte{0xc1, 0x00, 0x01})
	r := check.Store(s, check.Options{Values: true, Raw: map[string]bool{"c": true}, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, r.Err())
	r = check.Store(s, check.Options{Values: true, FormatVersion: tipkv.FormatVersion})
	require.Equal(t, 2, r.Count, "%v", r.Problems)
	for _, p := range r.Problems {
		require.Contains(t, p.Detail, "not msgpack", "read whole: c1 00 01 is no msgpack value")
	}
}
