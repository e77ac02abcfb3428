package console_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

// sse reads server-sent events from a response body.
type sse struct {
	r *bufio.Reader
}

type sseEvent struct {
	name, id, data string
}

// next returns the next event, skipping comments; io.EOF at the end.
func (s sse) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		}
	}
}

// openTail starts a tail and waits for its first comment: the server has
// read where to start, so what is appended from now on comes.
func openTail(t *testing.T, url string, hdr ...string) (sse, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "retry: 1000\n", line)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, ": tail of "), line)
	return sse{r}, resp
}

// The live tail sends each event appended after it started, in order,
// once, as soon as its commit wakes the follower; Last-Event-ID resumes
// after an event. On Pebble and on a shared engine (which watches).
func TestTail(t *testing.T) {
	for name, db := range map[string]*tipkv.DB{"pebble": testutil.OpenMem(t), "shared": tipkvtest.OpenShared(t, 1, nil)[0]} {
		t.Run(name, func(t *testing.T) {
			fill(t, db)
			_, srv := newConsole(t, db, nil)
			feed, err := versioned.NewFeed[click](db, nil)
			require.NoError(t, err)

			s, _ := openTail(t, srv.URL+"/api/tail?name=audit")
			var lat []time.Duration
			var ps []int64
			for _, page := range []string{"/a", "/b", "/c"} {
				p, err := feed.Append(db, "audit", click{Page: page})
				require.NoError(t, err)
				committed := time.Now()
				ev, err := s.next()
				require.NoError(t, err)
				lat = append(lat, time.Since(committed))
				require.Equal(t, "event", ev.name)
				require.Equal(t, strconv.FormatInt(p, 10), ev.id)
				var e console.Event
				require.NoError(t, json.Unmarshal([]byte(ev.data), &e))
				require.Equal(t, p, e.Position)
				require.JSONEq(t, `{"page":"`+page+`"}`, string(e.Value.JSON))
				ps = append(ps, p)
			}
			t.Logf("%s: commit to event on the wire: %v", name, lat)

			// Resume after the first: the two after it, at once.
			s2, _ := openTail(t, srv.URL+"/api/tail?name=audit", "Last-Event-ID", strconv.FormatInt(ps[0], 10))
			for _, p := range ps[1:] {
				ev, err := s2.next()
				require.NoError(t, err)
				require.Equal(t, strconv.FormatInt(p, 10), ev.id)
			}
		})
	}
}

// A tail ends when the console closes, and with an error event when the
// DB closes, so that neither waits for its clients.
func TestTailEnds(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	c, srv := newConsole(t, db, nil)
	s, _ := openTail(t, srv.URL+"/api/tail?name=audit")
	require.NoError(t, c.Close())
	_, err := s.next()
	require.ErrorIs(t, err, io.EOF)

	c2, srv2 := newConsole(t, db, nil)
	defer c2.Close()
	s, _ = openTail(t, srv2.URL+"/api/tail?name=audit")
	require.NoError(t, db.Close())
	ev, err := s.next()
	require.NoError(t, err)
	require.Equal(t, "error", ev.name)
	require.Contains(t, ev.data, "closed")
	_, err = s.next()
	require.ErrorIs(t, err, io.EOF)
}
