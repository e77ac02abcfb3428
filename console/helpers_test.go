package console_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

type order struct {
	Status string  `msgpack:"status"`
	Total  float64 `msgpack:"total"`
}

type click struct {
	Page string `msgpack:"page"`
}

// fill writes a small shop: orders with histories (one deleted), an audit
// stream with a consumer group, a jobs queue with a dead letter.
func fill(t testing.TB, db *tipkv.DB) {
	t.Helper()
	orders, err := versioned.NewCollection[order](db, "orders", nil)
	require.NoError(t, err)
	for _, s := range []string{"placed", "paid"} {
		_, err := orders.Put(db, "o-17", order{Status: s, Total: 42.5})
		require.NoError(t, err)
	}
	_, err = orders.Put(tipkv.WithMetadata(db, tipkv.Metadata{Author: "ada", Reason: "courier picked it up"}), "o-17", order{Status: "shipped", Total: 42.5})
	require.NoError(t, err)
	_, err = orders.Put(db, "o-18", order{Status: "placed", Total: 7})
	require.NoError(t, err)
	_, err = orders.Put(db, "gone", order{Status: "placed"})
	require.NoError(t, err)
	_, err = orders.Delete(db, "gone")
	require.NoError(t, err)

	feed, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	var last int64
	for _, p := range []string{"/", "/cart", "/pay"} {
		last, err = feed.Append(db, "audit", click{Page: p})
		require.NoError(t, err)
	}
	require.NoError(t, feed.Advance(db, "audit", "billing", 0, last-1))

	jobs, err := queue.Open[string](db, "jobs", &queue.Options[string]{MaxAttempts: 1})
	require.NoError(t, err)
	_, err = jobs.EnqueueWith(db, queue.EnqueueOptions{Headers: queue.Headers{"traceparent": "00-abc-01"}}, "first")
	require.NoError(t, err)
	_, err = jobs.Enqueue(db, "second", "third")
	require.NoError(t, err)
	ms, err := jobs.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.NoError(t, jobs.Release(ms[0].ID, 0))
	_, err = jobs.Receive(1, time.Minute) // "first" has had its one attempt: dead-lettered
	require.NoError(t, err)
}

// logBuf is a slog handler's output, safe for concurrent use.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuf) {
	b := &logBuf{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// newConsole returns a console of db and a test server serving it.
func newConsole(t testing.TB, db *tipkv.DB, opts *console.Options) (*console.Console, *httptest.Server) {
	t.Helper()
	c, err := console.New(db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	mux := http.NewServeMux()
	prefix := ""
	if opts != nil {
		prefix = opts.Prefix
	}
	mux.Handle(prefix+"/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return c, srv
}

// response is what get read.
type response struct {
	code int
	body string
	hdr  http.Header
}

// get fetches path from h.
func get(t testing.TB, h http.Handler, path string) response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return response{rec.Code, rec.Body.String(), rec.Header()}
}

// getJSON fetches an /api/ path, requires status, and decodes the body
// into v.
func getJSON(t testing.TB, h http.Handler, path string, status int, v any) {
	t.Helper()
	reflect.ValueOf(v).Elem().SetZero() // a fresh value: omitted fields stay zero
	r := get(t, h, path)
	require.Equal(t, status, r.code, "GET %s: %s", path, r.body)
	require.Equal(t, "application/json; charset=utf-8", r.hdr.Get("Content-Type"))
	require.NoError(t, json.Unmarshal([]byte(r.body), v), r.body)
}

// apiErr is the body of a JSON error.
type apiErr struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

// q builds a query string.
func q(kv ...string) string {
	vs := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		vs.Add(kv[i], kv[i+1])
	}
	return vs.Encode()
}

// post sends a form to srv with the client's cookies.
func post(t testing.TB, cl *http.Client, u string, form url.Values, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := cl.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// decodeBody decodes a JSON response and closes its body.
func decodeBody(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
