package once_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/once"
)

// A record reads back as written, and bytes that are no record are
// ErrCorrupt, never a panic.
func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []once.Record{
		{Kind: once.Window, Hash: once.Hash([]byte("a")), Result: 1, Due: 1 << 62},
		{Kind: once.UntilDone, Result: 1<<63 - 1},
		{Kind: once.UntilForgotten, Result: 0, Due: -5},
	} {
		got, err := once.Parse(r.Append(nil))
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	ok := once.Record{Kind: once.Window, Result: 7, Due: 9}.Append(nil)
	for _, bad := range [][]byte{nil, {0x01}, ok[:len(ok)-1], append(ok, 0), {0x02, 1}, append([]byte{0x01, 9}, ok[2:]...)} {
		_, err := once.Parse(bad)
		require.ErrorIs(t, err, codec.ErrCorrupt, "%x", bad)
	}
}

// A due entry's key splits into what made it, and due entries sort by
// their time first.
func TestDueKey(t *testing.T) {
	k := once.DueKey(nil, 42, "queue", "jobs", "k\x00y")
	due, space, name, key, err := once.ParseDueKey(k)
	require.NoError(t, err)
	require.Equal(t, []any{int64(42), "queue", "jobs", "k\x00y"}, []any{due, space, name, key})
	require.Less(t, string(once.DueKey(nil, 41, "zzz", "zzz", "zzz")), string(k))
	require.Less(t, string(k), string(once.DueKey(nil, 43, "", "a", "a")))
	_, _, _, _, err = once.ParseDueKey(append(k, 1))
	require.ErrorIs(t, err, codec.ErrCorrupt)
}

func FuzzParse(f *testing.F) {
	f.Add(once.Record{Kind: once.Window, Result: 7, Due: 9}.Append(nil))
	f.Add([]byte{0x01, 0x02})
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := once.Parse(v)
		if err != nil {
			return
		}
		got, err := once.Parse(r.Append(nil))
		require.NoError(t, err)
		require.Equal(t, r, got)
	})
}

func FuzzParseDueKey(f *testing.F) {
	f.Add(once.DueKey(nil, 42, "queue", "jobs", "k"))
	f.Add([]byte{0x08, 0x00})
	f.Fuzz(func(t *testing.T, k []byte) {
		due, space, name, key, err := once.ParseDueKey(k)
		if err != nil {
			return
		}
		require.Equal(t, k, once.DueKey(nil, due, space, name, key))
	})
}
