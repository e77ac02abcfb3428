package cli

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

type clickEvent struct {
	Page string `msgpack:"page"`
}

// groups lists a stream's consumer groups with their positions, lags,
// pending counts (up to --max) and the age of their oldest pending event,
// in name order, as table and JSON; without a stream, every group of the
// store by stream and name; no group exits 1.
func TestGroups(t *testing.T) {
	fixNow(t)
	var ps []int64
	dir := writeStore(t, func(db *tipkv.DB) {
		at := t0
		f, err := versioned.NewFeed[clickEvent](db, &versioned.FeedOptions[clickEvent]{Clock: func() time.Time { return at }})
		require.NoError(t, err)
		for i := range 4 {
			at = t0.Add(time.Duration(i) * time.Minute)
			p, err := f.Append(db, "clicks", clickEvent{fmt.Sprint("/p", i)})
			require.NoError(t, err)
			ps = append(ps, p)
		}
		require.NoError(t, f.Advance(db, "clicks", "search", 0, ps[3]))
		require.NoError(t, f.Advance(db, "clicks", "billing", 0, ps[1]))
		require.NoError(t, f.Advance(db, "audit", "archive", 0, 1))
	})
	out := cliOK(t, "groups", dir, "clicks")
	require.Equal(t, `GROUP    POSITION             TIME                  LAG   PENDING  AGE
billing  `+fmt.Sprint(ps[1])+`  2025-03-01T12:01:00Z  2m0s  2        1h58m0s
search   `+fmt.Sprint(ps[3])+`  2025-03-01T12:03:00Z  0s    0        -
`, out)
	m := jsonOf(t, cliOK(t, "groups", "--json", dir, "clicks"))
	require.EqualValues(t, ps[3], m["newest"])
	require.Len(t, m["groups"], 2)
	billing := m["groups"].([]any)[0].(map[string]any)
	require.EqualValues(t, 2*time.Minute, billing["lag_ns"])
	require.EqualValues(t, 2, billing["pending"])
	require.EqualValues(t, ps[2], billing["oldest_pending"])
	require.EqualValues(t, 118*time.Minute, billing["pending_age_ns"])

	out = cliOK(t, "groups", "--max", "1", dir)
	require.Equal(t, `STREAM  GROUP    POSITION             TIME                            LAG   PENDING  AGE
audit   archive  1                    1970-01-01T00:00:00.000000001Z  0s    0        -
clicks  billing  `+fmt.Sprint(ps[1])+`  2025-03-01T12:01:00Z            2m0s  1+       1h58m0s
clicks  search   `+fmt.Sprint(ps[3])+`  2025-03-01T12:03:00Z            0s    0        -
`, out)

	_, errOut, code := cli(t, "groups", dir, "views")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, `stream "views" has no consumer groups`)
	_, errOut, code = cli(t, "groups", "--max", "-1", dir)
	require.Equal(t, exitUsage, code, errOut)
	empty := writeStore(t, func(*tipkv.DB) {})
	_, errOut, code = cli(t, "groups", empty)
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "the store has no consumer groups")
}

// tail shows the newest N events, then each event another process
// appends to a shared engine's store as it commits, until stopped; with
// -n 0 only new ones.
func TestTail(t *testing.T) {
	var writer *tipkv.DB
	target := sharedStore(t, "tail", func(db *tipkv.DB) {
		f, err := versioned.NewFeed[clickEvent](db, nil)
		require.NoError(t, err)
		for i := range 3 {
			_, err := f.Append(db, "clicks", clickEvent{fmt.Sprint("/old", i)})
			require.NoError(t, err)
		}
	})
	sharedStores.Lock()
	hub := sharedStores.m[target]
	sharedStores.Unlock()
	writer, err := tipkv.OpenEngine(hub.Handle(), "writer", nil)
	require.NoError(t, err)
	defer writer.Close()
	wf, err := versioned.NewFeed[clickEvent](writer, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		n     string
		first []string // the events shown before any new one
	}{{"2", []string{"/old1", "/old2"}}, {"0", nil}} {
		t.Run("n="+tc.n, func(t *testing.T) {
			var mu sync.Mutex
			var shown []int64
			stopCh := make(chan func(), 1)
			knobs.tailing = func(stop func()) { stopCh <- stop }
			knobs.tailed = func(p int64) {
				mu.Lock()
				shown = append(shown, p)
				mu.Unlock()
			}
			t.Cleanup(func() { knobs.tailing, knobs.tailed = nil, nil })
			var out, errOut bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run([]string{"tail", "-n", tc.n, target, "clicks"}, &out, &errOut, testEngines) }()
			stop := <-stopCh
			waitShown := func(k int) {
				require.Eventually(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(shown) >= k
				}, time.Minute, time.Millisecond, "events shown")
			}
			waitShown(len(tc.first))
			p, err := wf.Append(writer, "clicks", clickEvent{"/new-" + tc.n})
			require.NoError(t, err)
			waitShown(len(tc.first) + 1)
			stop()
			require.Equal(t, exitOK, <-done, errOut.String())
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			require.Len(t, lines, len(tc.first)+1, out.String())
			for i, page := range tc.first {
				require.Contains(t, lines[i], page)
			}
			require.True(t, strings.HasPrefix(lines[len(tc.first)], fmt.Sprint(p)), lines)
			require.Contains(t, lines[len(tc.first)], `{"page":"/new-`+tc.n+`"}`)
		})
	}
}
