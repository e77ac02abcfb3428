package console_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// The sampler keeps the last Samples readings, oldest first, with
// counters as rates: writes of this process show as writes per second.
// Negative SampleInterval: no sampling, no charts.
func TestSamples(t *testing.T) {
	db := testutil.OpenMem(t)
	users, err := versioned.NewCollection[string](db, "users", nil)
	require.NoError(t, err)
	c, err := console.New(db, &console.Options{SampleInterval: time.Millisecond, Samples: 3})
	require.NoError(t, err)
	defer c.Close()
	var s console.Samples
	for i := 0; ; i++ {
		_, err := users.Put(db, "ada", "x")
		require.NoError(t, err)
		getJSON(t, c, "/api/samples", http.StatusOK, &s)
		require.LessOrEqual(t, len(s.Samples), 3)
		if len(s.Samples) == 3 && s.Samples[2].Writes > 0 {
			break
		}
		time.Sleep(time.Millisecond) // progress: the next tick
	}
	require.Equal(t, time.Millisecond, s.Interval)
	require.True(t, s.Samples[0].Time.Before(s.Samples[2].Time))
	require.Contains(t, get(t, c, "/").body, `data-key="writes_per_second"`)

	off, err := console.New(db, &console.Options{SampleInterval: -1})
	require.NoError(t, err)
	defer off.Close()
	getJSON(t, off, "/api/samples", http.StatusOK, &s)
	require.Empty(t, s.Samples)
	var o console.Overview
	getJSON(t, off, "/api/overview", http.StatusOK, &o)
	require.False(t, o.Charts)
	require.NotContains(t, get(t, off, "/").body, `id="charts"`)
}
