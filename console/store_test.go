package console_test

import (
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
)

// On a Pebble store in a directory, as a service holds it open, the
// overview names the engine and the directory and counts its size on
// disk, and every page of the store's names, documents, streams and
// queues answers 200 with its data.
func TestOnDisk(t *testing.T) {
	db, dir := testutil.OpenDir(t, nil)
	fill(t, db)
	c, err := console.New(db, nil)
	require.NoError(t, err)
	defer c.Close()

	var o console.Overview
	getJSON(t, c, "/api/overview", http.StatusOK, &o)
	require.Equal(t, "pebble", o.Engine)
	require.Equal(t, dir, o.Dir)
	require.Positive(t, o.DiskUsage)
	require.Equal(t, 1, o.Collections)
	require.Equal(t, 1, o.Streams)
	require.Len(t, o.Queues, 1)
	r := get(t, c, "/")
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, dir)

	for path, want := range map[string]string{
		"/collection?name=orders":           "o-18",
		"/document?name=orders&id=o-17":     "shipped",
		"/diff?name=orders&id=o-17&a=1&b=2": "paid",
		"/stream?name=audit":                "/cart",
		"/queue?name=jobs":                  "third",
		"/message?name=jobs&seq=3":          "third",
		"/deadletter?name=jobs&seq=1":       "first",
	} {
		r := get(t, c, path)
		require.Equal(t, http.StatusOK, r.code, "%s: %s", path, r.body)
		require.Contains(t, r.body, want, path)
		r = get(t, c, "/api"+path)
		require.Equal(t, http.StatusOK, r.code, "/api%s: %s", path, r.body)
		require.Contains(t, r.body, want, "/api"+path)
	}
}

// A client that is not a browser gets its token from GET /api/token (with
// the cookie it must send back) and passes it in X-Console-Token; the
// token is worthless without that cookie.
func TestTokenEndpoint(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	lg, logs := newLogger()
	_, srv := newConsole(t, db, &console.Options{
		Prefix:    "/ops",
		Logger:    lg,
		Authorize: func(*http.Request, console.Action) error { return nil },
	})
	cl := browser(t)
	var tok struct{ Token string }
	resp, err := cl.Get(srv.URL + "/ops/api/token")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ck := resp.Cookies()
	require.Len(t, ck, 1)
	require.True(t, ck[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck[0].SameSite)
	require.Equal(t, "/ops", ck[0].Path)
	require.NoError(t, decodeBody(resp, &tok))
	require.NotEmpty(t, tok.Token)

	form := url.Values{"name": {"jobs"}, "seq": {"1"}}
	code, body := post(t, browser(t), srv.URL+"/ops/api/discard", form, "X-Console-Token", tok.Token)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "CSRF")
	code, body = post(t, cl, srv.URL+"/ops/api/discard", form, "X-Console-Token", tok.Token)
	require.Equal(t, http.StatusOK, code, body)

	// A second GET keeps the cookie and so the token.
	resp, err = cl.Get(srv.URL + "/ops/api/token")
	require.NoError(t, err)
	require.Empty(t, resp.Cookies())
	var again struct{ Token string }
	require.NoError(t, decodeBody(resp, &again))
	require.Equal(t, tok.Token, again.Token)

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], "level=WARN")
	require.Contains(t, lines[1], "level=INFO")
	require.Contains(t, lines[1], "action=discard queue=jobs seqs=[1] remote=127.0.0.1:")
}

// The console is built on the standard library, tipkv's own packages and
// the msgpack module tipkv's default codec already needs (to render its
// values): it adds no dependency to the module. The root package does not
// import it: a service that does not mount it does not link it.
func TestImportsStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/tipkv/tipkv/console").Output()
	require.NoError(t, err, "go list")
	n := 0
	for _, imp := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(imp, "/")
		std := !strings.Contains(first, ".")
		ok := std || strings.HasPrefix(imp, "github.com/tipkv/tipkv") || strings.HasPrefix(imp, "github.com/vmihailenco/msgpack/v5")
		require.True(t, ok, "the console imports %s", imp)
		n++
	}
	require.Greater(t, n, 5, "go list found the imports")

	out, err = exec.Command("go", "list", "-deps", "github.com/tipkv/tipkv", "github.com/tipkv/tipkv/versioned", "github.com/tipkv/tipkv/queue").Output()
	require.NoError(t, err, "go list")
	for _, dep := range strings.Fields(string(out)) {
		require.NotEqual(t, "github.com/tipkv/tipkv/console", dep)
		require.NotEqual(t, "html/template", dep, "the core links html/template")
	}
}
