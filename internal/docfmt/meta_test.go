package docfmt_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/docfmt"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []docfmt.Meta{
		{},
		{Author: "ada", Reason: "typo", CorrelationID: "c", CausationID: "e"},
		{Headers: map[string]string{"b": "2", "a": "", "\x00": "\xff"}},
	} {
		b, err := docfmt.AppendMeta(nil, m)
		require.NoError(t, err)
		got, err := docfmt.ParseMeta(b)
		require.NoError(t, err)
		if len(m.Headers) == 0 {
			m.Headers = nil
		}
		require.Equal(t, m, got)
	}
	a, _ := docfmt.AppendMeta(nil, docfmt.Meta{Headers: map[string]string{"a": "1", "b": "2", "c": "3"}})
	for range 20 {
		b, _ := docfmt.AppendMeta(nil, docfmt.Meta{Headers: map[string]string{"c": "3", "b": "2", "a": "1"}})
		require.Equal(t, a, b, "one encoding per Meta")
	}
	_, err := docfmt.AppendMeta(nil, docfmt.Meta{Reason: strings.Repeat("r", docfmt.MaxMetaField+1)})
	require.Error(t, err)
}

// No bytes make ParseMeta panic, and what it decodes encodes and decodes
// back to itself.
func FuzzParseMeta(f *testing.F) {
	b, _ := docfmt.AppendMeta(nil, docfmt.Meta{Author: "a", Headers: map[string]string{"k": "v"}})
	f.Add(b)
	f.Add([]byte{1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := docfmt.ParseMeta(b)
		if err != nil {
			return
		}
		again, err := docfmt.AppendMeta(nil, m)
		if err != nil {
			return // past the bounds a write checks
		}
		m2, err := docfmt.ParseMeta(again)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}
