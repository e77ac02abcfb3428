package docfmt_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/docfmt"
)

// Each form of an event value, written and read back; the rules of an
// older format read every value as the event.
func TestEventForms(t *testing.T) {
	meta, err := docfmt.AppendMeta(nil, docfmt.Meta{Author: "ada"})
	require.NoError(t, err)
	cases := []struct {
		name     string
		ev, meta []byte
		stored   []byte
	}{
		{"plain", []byte("abc"), nil, []byte("abc")},
		{"empty", []byte{}, nil, []byte{}},
		{"starts with C1", []byte{0xc1, 0x20}, nil, []byte{0xc1, 0x00, 0xc1, 0x20}},
		{"metadata", []byte("abc"), meta, append(append([]byte{0xc1, 0x20, byte(len(meta))}, meta...), "abc"...)},
		{"metadata and C1", []byte{0xc1}, meta, append(append([]byte{0xc1, 0x20, byte(len(meta))}, meta...), 0xc1)},
	}
	for _, c := range cases {
		stored := docfmt.AppendEvent(nil, c.meta, c.ev)
		require.Equal(t, c.stored, stored, c.name)
		require.True(t, docfmt.CanonicalEvent(stored), c.name)
		ev, m := docfmt.ParseEvent(stored)
		require.Equal(t, c.ev, ev, c.name)
		require.Equal(t, c.meta, m, c.name)
		ev, m = docfmt.RulesOf(3).ParseEvent(stored)
		require.Equal(t, stored, ev, "%s: by format 3's rules", c.name)
		require.Nil(t, m, c.name)
	}
	// A C1 value no form matches reads as the event, and is not canonical.
	for _, v := range [][]byte{{0xc1}, {0xc1, 0x01, 'x'}, {0xc1, 0x20, 0x05, 'x'}} {
		ev, m := docfmt.ParseEvent(v)
		require.Equal(t, v, ev)
		require.Nil(t, m)
		require.False(t, docfmt.CanonicalEvent(v), "%x", v)
	}
	// Forms that read, but that no writer makes: an escape of an event
	// that does not start with C1, a length in more bytes than needed.
	for _, v := range [][]byte{{0xc1, 0x00, 'x'}, {0xc1, 0x20, 0x80, 0x00, 'x'}} {
		ev, _ := docfmt.ParseEvent(v)
		require.Equal(t, []byte("x"), ev)
		require.False(t, docfmt.CanonicalEvent(v), "%x", v)
	}
}

// The upgrade from formats 1 to 3 escapes exactly the values that start
// with C1, so that each reads by the current rules as it read by its own.
func FuzzUpgradeEvent(f *testing.F) {
	for _, s := range [][]byte{{}, []byte("abc"), {0xc1}, {0xc1, 0x00, 'a'}, {0xc1, 0x20, 0x01, 0x02}} {
		f.Add(3, s)
	}
	f.Fuzz(func(t *testing.T, from int, v []byte) {
		from = 1 + (from&0x7fffffff)%4 // formats 1 to 4
		up, changed := docfmt.UpgradeEvent(from, v)
		if from >= docfmt.TimeFormat {
			require.False(t, changed)
			return
		}
		require.Equal(t, len(v) > 0 && v[0] == 0xc1, changed)
		require.True(t, docfmt.CanonicalEvent(up), "%x", up)
		ev, m := docfmt.ParseEvent(up)
		require.True(t, bytes.Equal(v, ev), "%x reads as %x", v, ev)
		require.Nil(t, m)
	})
}

// Any value parses without a panic, and what it parses to rebuilds it
// when it is canonical.
func FuzzParseEvent(f *testing.F) {
	for _, s := range [][]byte{{}, []byte("abc"), {0xc1}, {0xc1, 0x00, 'a'}, {0xc1, 0x20, 0x01, 0x02, 'x'}, {0xc1, 0x20, 0xff, 0xff, 0xff}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		ev, m := docfmt.ParseEvent(v)
		if docfmt.CanonicalEvent(v) {
			require.Equal(t, v, docfmt.AppendEvent(nil, m, ev))
		}
	})
}
