package console_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// browser is an HTTP client with cookies that does not follow redirects.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var tokenField = regexp.MustCompile(`name="token" value="([^"]+)"`)

// pageToken loads a page with cl and returns the CSRF token in its forms.
func pageToken(t *testing.T, cl *http.Client, u string) string {
	t.Helper()
	resp, err := cl.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	m := tokenField.FindSubmatch(b)
	require.NotNil(t, m, "no token in the page")
	return string(m[1])
}

func deadCount(t *testing.T, c http.Handler) int {
	t.Helper()
	var qp console.QueuePage
	getJSON(t, c, "/api/queue?name=jobs", http.StatusOK, &qp)
	return qp.DeadLetters
}

// deadLetterAll moves the visible messages of jobs (MaxAttempts 1) to
// its dead letters: one delivery each, released, then the next Receive.
func deadLetterAll(t *testing.T, db *tipkv.DB) {
	t.Helper()
	jobs, err := queue.Open[string](db, "jobs", &queue.Options[string]{MaxAttempts: 1})
	require.NoError(t, err)
	ms, err := jobs.Receive(10, time.Minute)
	require.NoError(t, err)
	for _, m := range ms {
		require.NoError(t, jobs.Release(m.ID, 0))
	}
	_, err = jobs.Receive(10, time.Minute)
	require.NoError(t, err)
}

// A read-only console runs no action, whatever the request carries, and
// its pages offer none.
func TestActionsOffByDefault(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	c, srv := newConsole(t, db, nil)
	cl := browser(t)
	code, body := post(t, cl, srv.URL+"/api/requeue", url.Values{"name": {"jobs"}, "seq": {"1"}, "token": {"x"}})
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "read-only")
	require.Equal(t, 1, deadCount(t, c))
	require.NotContains(t, get(t, c, "/queue?name=jobs").body, "/api/requeue")
}

// With Authorize set: an action runs with the token of the browser's
// page, is refused without it, with another browser's, from another site,
// or when Authorize says no; each run or refusal logs a line. A form's
// back redirects to the queue's page, which shows the change.
func TestActions(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	lg, logs := newLogger()
	var (
		mu    sync.Mutex
		asked []console.Action
	)
	c, srv := newConsole(t, db, &console.Options{
		Logger: lg,
		Authorize: func(r *http.Request, a console.Action) error {
			mu.Lock()
			asked = append(asked, a)
			mu.Unlock()
			if r.Header.Get("X-User") == "intern" {
				return errors.New("operators only")
			}
			return nil
		},
	})
	cl := browser(t)
	token := pageToken(t, cl, srv.URL+"/queue?name=jobs")
	form := func(tok string) url.Values {
		return url.Values{"name": {"jobs"}, "seq": {"1"}, "token": {tok}}
	}

	for _, tc := range []struct {
		name   string
		cl     *http.Client
		form   url.Values
		hdr    []string
		status int
		says   string
	}{
		{"no token", cl, form(""), nil, http.StatusForbidden, "CSRF"},
		{"bad token", cl, form("AAAA"), nil, http.StatusForbidden, "CSRF"},
		{"another browser's cookie", browser(t), form(token), nil, http.StatusForbidden, "CSRF"},
		{"from another site", cl, form(token), []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "another site"},
		{"refused by Authorize", cl, form(token), []string{"X-User", "intern"}, http.StatusForbidden, "operators only"},
		{"no such dead letter", cl, url.Values{"name": {"jobs"}, "seq": {"7"}, "token": {token}}, nil, http.StatusNotFound, "7"},
		{"no such queue", cl, url.Values{"name": {"nope"}, "seq": {"1"}, "token": {token}}, nil, http.StatusNotFound, "nope"},
		{"no seq", cl, url.Values{"name": {"jobs"}, "token": {token}}, nil, http.StatusBadRequest, "is required"},
		{"back off the site", cl, url.Values{"name": {"jobs"}, "seq": {"1"}, "token": {token}, "back": {"//evil.example/"}}, nil, http.StatusBadRequest, "not a path on this site"},
	} {
		code, body := post(t, tc.cl, srv.URL+"/api/requeue", tc.form, tc.hdr...)
		require.Equal(t, tc.status, code, "%s: %s", tc.name, body)
		require.Contains(t, body, tc.says, tc.name)
		require.Equal(t, 1, deadCount(t, c), tc.name)
	}
	// Only the requests that passed the token check reached Authorize,
	// with what they would do.
	mu.Lock()
	got := append([]console.Action(nil), asked...)
	mu.Unlock()
	require.Equal(t, []console.Action{
		{Name: "requeue", Queue: "jobs", Seqs: []int64{1}},
		{Name: "requeue", Queue: "jobs", Seqs: []int64{7}},
		{Name: "requeue", Queue: "nope", Seqs: []int64{1}},
	}, got)

	// The token also works as a header, and the answer is JSON.
	var qp console.QueuePage
	getJSON(t, c, "/api/queue?name=jobs", http.StatusOK, &qp)
	depth := qp.Depth
	code, body := post(t, cl, srv.URL+"/api/requeue", url.Values{"name": {"jobs"}, "seq": {"1"}}, "X-Console-Token", token)
	require.Equal(t, http.StatusOK, code, body)
	var res console.ActionResult
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	require.Equal(t, console.ActionResult{Action: "requeue", Queue: "jobs", Seqs: []int64{1}}, res)
	getJSON(t, c, "/api/queue?name=jobs", http.StatusOK, &qp)
	require.Equal(t, 0, qp.DeadLetters)
	require.Equal(t, depth+1, qp.Depth)

	// Every attempt logged a line: the refusals at WARN, the run at INFO.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 10)
	for _, l := range lines[:9] {
		require.Contains(t, l, "level=WARN")
		require.Contains(t, l, "event=console-action action=requeue")
	}
	require.Contains(t, lines[9], "level=INFO")
	require.Contains(t, lines[9], "event=console-action action=requeue queue=jobs seqs=[1]")

	// Discard through a page's form: 303 back to the queue.
	deadLetterAll(t, db)
	require.Equal(t, 2, deadCount(t, c))
	var dl console.QueuePage
	getJSON(t, c, "/api/queue?name=jobs", http.StatusOK, &dl)
	seq := strconv.FormatInt(dl.OldestDeadLetters[0].Seq, 10)
	resp, err := cl.PostForm(srv.URL+"/api/discard", url.Values{"name": {"jobs"}, "seq": {seq}, "token": {token}, "back": {"/queue?name=jobs"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/queue?name=jobs", resp.Header.Get("Location"))
	require.Equal(t, 1, deadCount(t, c))
	require.Contains(t, logs.String(), "action=discard queue=jobs")

	// An action's parameters travel in the body only.
	code, body = post(t, cl, srv.URL+"/api/discard?name=jobs&seq=1", url.Values{"token": {token}})
	require.Equal(t, http.StatusBadRequest, code, body)
}
