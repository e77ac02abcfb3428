package spec_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/metrics/internal/spec"
)

// Each metric has unique names, one source, and names that say its kind
// and unit as each system expects.
func TestSpec(t *testing.T) {
	names, proms := map[string]bool{}, map[string]bool{}
	for _, m := range spec.All {
		require.False(t, names[m.Name], "duplicate %s", m.Name)
		require.False(t, proms[m.Prom], "duplicate %s", m.Prom)
		names[m.Name], proms[m.Prom] = true, true
		require.True(t, strings.HasPrefix(m.Name, "tipkv."), m.Name)
		require.True(t, strings.HasPrefix(m.Prom, "tipkv_"), m.Prom)
		require.NotEmpty(t, m.Help, m.Name)

		sources := 0
		for _, set := range []bool{m.Store != nil, m.Level != nil, m.Queue != nil, m.Collection != nil, m.FeedRetention != nil, m.DB != nil} {
			if set {
				sources++
			}
		}
		require.Equal(t, 1, sources, "%s: one source", m.Name)

		base := m.Prom
		if m.Kind == spec.Counter {
			require.True(t, strings.HasSuffix(base, "_total"), "%s: a counter ends in _total", m.Prom)
			base = strings.TrimSuffix(base, "_total")
		} else {
			require.False(t, strings.HasSuffix(base, "_total"), m.Prom)
		}
		switch m.Unit {
		case spec.Bytes:
			require.True(t, strings.HasSuffix(base, "_bytes"), "%s: unit in the name", m.Prom)
		case spec.Seconds:
			require.True(t, strings.HasSuffix(base, "_seconds"), "%s: unit in the name", m.Prom)
		default:
			require.Equal(t, spec.None, m.Unit, m.Name)
		}
	}
}
