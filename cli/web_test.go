package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/console"
)

// webRun runs tipkv web with args in the background and returns its URL
// once it serves, a function that stops it as an interrupt would, and
// one that waits for its exit status and output.
func webRun(t *testing.T, args ...string) (webURL string, stop func(), wait func() (int, string, string)) {
	t.Helper()
	type serving struct {
		url  string
		stop func()
	}
	up := make(chan serving, 1)
	knobs.webServing = func(url string, stop func()) { up <- serving{url, stop} }
	t.Cleanup(func() { knobs.webServing = nil })
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"web"}, args...), &out, &errOut, testEngines) }()
	select {
	case s := <-up:
		return s.url, s.stop, func() (int, string, string) { code := <-done; return code, out.String(), errOut.String() }
	case code := <-done:
		t.Fatalf("tipkv web exited with %d before serving:\n%s%s", code, out.String(), errOut.String())
		return "", nil, nil
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// tipkv web serves the console of a stopped Pebble store on the loopback
// address, read-only: the document's history reads back through the JSON
// endpoint, the page offers no action, and an interrupt ends it with
// status 0 and the store closed (it opens again).
func TestWeb(t *testing.T) {
	dir := sample(t)
	url, stop, wait := webRun(t, dir)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	code, body := get(t, url+"api/document?name=users&id=alice")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "alice@example.com")
	code, body = get(t, url+"queues")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "Requeue", "read-only: no action")
	stop()
	status, out, errOut := wait()
	require.Equal(t, exitOK, status, errOut)
	require.Contains(t, out, "serving "+dir+" (read-only) at "+url)
	cliOK(t, "check", dir)
}

// With --actions the console's Requeue acts (through its token, as a
// script would), is logged on stderr, and what it did is in the store once
// web exits; --json prints the URL as JSON; an address it cannot listen on
// is bad usage.
func TestWebActions(t *testing.T) {
	dir := sample(t)
	webURL, stop, wait := webRun(t, "--json", "--actions", dir)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	cl := &http.Client{Jar: jar}
	resp, err := cl.Get(webURL + "api/token")
	require.NoError(t, err)
	var tok console.Token
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	resp.Body.Close()
	req, err := http.NewRequest(http.MethodPost, webURL+"api/requeue", strings.NewReader(url.Values{"name": {"jobs"}, "seq": {"2"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Console-Token", tok.Token)
	resp, err = cl.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	stop()
	status, out, errOut := wait()
	require.Equal(t, exitOK, status, errOut)
	require.Contains(t, errOut, "console-action")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Equal(t, webURL, m["url"])
	require.Equal(t, true, m["actions"])
	q := jsonOf(t, cliOK(t, "queue", "--json", dir, "jobs"))
	require.EqualValues(t, 0, q["dead"], "requeued: %v", q)
	require.EqualValues(t, 3, q["depth"])

	_, errOut, code := cli(t, "web", "--addr", "256.0.0.1:1", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "listen on 256.0.0.1:1")
}
