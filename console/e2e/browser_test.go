package e2e_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

var screenshots = flag.String("screenshots", "", "also write PNG screenshots of the main pages into this directory")

// stepTimeout bounds one browser step: a step that has not happened by
// then has failed. No step waits for a window of time to pass.
const stepTimeout = time.Minute

type order struct {
	Status string  `msgpack:"status"`
	Total  float64 `msgpack:"total"`
}

type click struct {
	Page string `msgpack:"page"`
}

// fill writes a small shop through the public packages: orders with
// histories, an audit stream with a consumer group, a jobs queue with one
// dead letter (sequence 1) and two messages.
func fill(t *testing.T, db *tipkv.DB) {
	t.Helper()
	orders, err := versioned.NewCollection[order](db, "orders", nil)
	require.NoError(t, err)
	for _, s := range []string{"placed", "paid", "shipped"} {
		_, err := orders.Put(db, "o-17", order{Status: s, Total: 42.5})
		require.NoError(t, err)
	}
	_, err = orders.Put(db, "o-18", order{Status: "placed", Total: 7})
	require.NoError(t, err)

	feed, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	var last int64
	for _, p := range []string{"/", "/cart", "/pay"} {
		last, err = feed.Append(db, "audit", click{Page: p})
		require.NoError(t, err)
	}
	require.NoError(t, feed.Advance(db, "audit", "billing", 0, last-1))

	jobs := jobsQueue(t, db)
	_, err = jobs.Enqueue(db, "first")
	require.NoError(t, err)
	deadLetterAll(t, jobs)
	_, err = jobs.Enqueue(db, "second", "third")
	require.NoError(t, err)
}

// jobsQueue opens the jobs queue: one attempt, then a dead letter.
func jobsQueue(t *testing.T, db *tipkv.DB) *queue.Queue[string] {
	t.Helper()
	jobs, err := queue.Open[string](db, "jobs", &queue.Options[string]{MaxAttempts: 1})
	require.NoError(t, err)
	return jobs
}

// deadLetterAll moves every visible message of jobs to its dead letters:
// one delivery each, released, then the Receive that finds them spent.
func deadLetterAll(t *testing.T, jobs *queue.Queue[string]) {
	t.Helper()
	ms, err := jobs.Receive(10, time.Minute)
	require.NoError(t, err)
	for _, m := range ms {
		require.NoError(t, jobs.Release(m.ID, 0))
	}
	_, err = jobs.Receive(10, time.Minute)
	require.NoError(t, err)
}

// deadLetters returns the sequence numbers of jobs' dead letters, read
// through the queue package, not the console.
func deadLetters(t *testing.T, jobs *queue.Queue[string]) []int64 {
	t.Helper()
	var out []int64
	for d, err := range jobs.DeadLetters() {
		require.NoError(t, err)
		out = append(out, d.Seq)
	}
	return out
}

// logBuf is a log's output, safe for concurrent use.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// actions returns the log's console-action lines.
func (b *logBuf) actions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, "event=console-action") {
			out = append(out, l)
		}
	}
	return out
}

// site is a service holding a Pebble store open in a directory, with the
// console mounted under /ops and actions on, and a browser tab on it.
type site struct {
	db   *tipkv.DB
	jobs *queue.Queue[string]
	url  string // the console's root, without a trailing slash
	logs *logBuf
	tab  context.Context // a chromedp context: one tab
}

func newSite(t *testing.T) *site {
	t.Helper()
	logs := &logBuf{}
	// The console logs actions through the DB's logger
	// (tipkv.Options.Logger): the service gives none to the console.
	db, err := tipkv.Open(t.TempDir(), &tipkv.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	fill(t, db)
	c, err := console.New(db, &console.Options{
		Prefix: "/ops",
		Authorize: func(r *http.Request, a console.Action) error {
			if a.Queue != "jobs" {
				return fmt.Errorf("only jobs")
			}
			return nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	mux := http.NewServeMux()
	mux.Handle("/ops/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &site{db: db, jobs: jobsQueue(t, db), url: srv.URL + "/ops", logs: logs, tab: newTab(t)}
}

// chromium returns the browser's path: $CHROMIUM, or chromium on PATH.
// Without one the test skips, unless $CI is set.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no chromium on PATH in CI: console/e2e/install-chromium.sh installs it")
		}
		t.Skip("no chromium on PATH: run console/e2e/install-chromium.sh (or set $CHROMIUM)")
	}
	return p
}

// newTab starts a headless browser for the test and returns its tab. The
// tab fails the test on a script error or a Content-Security-Policy
// violation in any page it loads.
func newTab(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(1200, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first Run starts the browser; it lives as long as tab.
	_, err := chromedp.Run(tab, chromedp.Evaluate[int](`1`))
	require.NoError(t, err, "starting %s", chromium(t))

	var (
		mu       sync.Mutex
		problems []string
	)
	go func() {
		for ev, err := range chromedp.Events(tab, runtime.ExceptionThrown) {
			if err != nil {
				return
			}
			mu.Lock()
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("script error: %s (%s:%d)", msg, d.URL, d.LineNumber))
			mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range chromedp.Events(tab, log.EntryAdded) {
			if err != nil {
				return
			}
			e := ev.Entry
			if e.Level == log.EntryLevelError && (e.Source == log.EntrySourceJavascript || e.Source == log.EntrySourceSecurity) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %s (%s)", e.Source, e.Text, e.URL))
				mu.Unlock()
			}
		}
	}()
	_, err = chromedp.Call(tab, log.Enable, struct{}{})
	require.NoError(t, err)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, problems, "the browser reported errors")
	})
	return tab
}

// do runs steps in the site's tab, each within stepTimeout.
func (s *site) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.tab, stepTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// run runs one step that returns a value.
func run[T any](t *testing.T, s *site, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.tab, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

// open loads a page of the console and requires it to answer 200.
func (s *site) open(t *testing.T, path string) {
	t.Helper()
	resp := run(t, s, chromedp.NavigateResponse(s.url+path))
	require.EqualValues(t, http.StatusOK, resp.Status, path)
}

// submit clicks sel, which loads a page, and returns that page's
// response (after redirects).
func (s *site) submit(t *testing.T, sel string) *network.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.tab, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	require.NoError(t, err)
	return resp
}

func (s *site) text(t *testing.T, sel string) string {
	t.Helper()
	return run(t, s, chromedp.Text(chromedp.CSS(sel)))
}

// waitFor waits until the page's JavaScript expression cond is true: it
// checks at once and on every change of the document (a
// MutationObserver), so it returns as soon as the page shows it. The
// check runs through the DevTools protocol, which the page's CSP allows.
func (s *site) waitFor(t *testing.T, cond string) {
	t.Helper()
	js := `new Promise(function (resolve) {
		var ok = function () { try { return !!(` + cond + `); } catch (e) { return false; } };
		if (ok()) { resolve(true); return; }
		var o = new MutationObserver(function () { if (ok()) { o.disconnect(); resolve(true); } });
		o.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
	})`
	ctx, cancel := context.WithTimeout(s.tab, stepTimeout)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
	if err != nil || !ok {
		// Say what the page shows instead.
		html, _ := chromedp.Run(s.tab, chromedp.Evaluate[string](`document.querySelector("main").innerHTML`))
		t.Fatalf("waiting for %s: %v; the page's main:\n%s", cond, err, html)
	}
}

// shoot writes a screenshot of the page as name.png when -screenshots
// names a directory, and checks it is a PNG either way.
func (s *site) shoot(t *testing.T, name string) {
	t.Helper()
	png := run(t, s, chromedp.FullScreenshot(100))
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "a PNG screenshot")
	if *screenshots != "" {
		require.NoError(t, os.MkdirAll(*screenshots, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(*screenshots, name+".png"), png, 0o644))
	}
}

// The main pages load in a browser with what the store holds, with no
// script error or CSP violation, and their links lead on: overview to
// queue, collection to document.
func TestPages(t *testing.T) {
	s := newSite(t)
	s.open(t, "/")
	require.Equal(t, "Overview", s.text(t, "main h1"))
	require.Contains(t, s.text(t, "table.queues"), "jobs")
	require.Equal(t, "actions on", s.text(t, "header .mode"))
	s.shoot(t, "overview")

	resp := s.submit(t, `table.queues a[href="/ops/queue?name=jobs"]`)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Equal(t, "2", s.text(t, "#depth"))
	require.Equal(t, "1", s.text(t, "#dead"))
	require.Contains(t, s.text(t, "#m2"), "second")
	require.Contains(t, s.text(t, "#d1"), "first")
	s.shoot(t, "queue")

	s.open(t, "/collection?name=orders")
	require.Contains(t, s.text(t, "main"), `{"status":"shipped","total":42.5}`)
	resp = s.submit(t, `a[href*="id=o-18"]`)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Contains(t, s.text(t, "#v1"), `"placed"`)

	s.open(t, "/stream?name=audit")
	require.Contains(t, s.text(t, "table.groups"), "billing")
	require.Contains(t, s.text(t, "#events"), "/pay")
	s.shoot(t, "stream")

	s.open(t, "/deadletter?name=jobs&seq=1")
	require.Contains(t, s.text(t, "main"), "first")
}

// A document's history shows every version newest first; choosing two
// versions in its form and asking for the diff shows the lines that
// changed; as-of shows the version then.
func TestDocumentHistoryAndDiff(t *testing.T) {
	s := newSite(t)
	s.open(t, "/document?name=orders&id=o-17")
	ids := run(t, s, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.history tr[id]"), function (r) { return r.id; })`))
	require.Equal(t, []string{"v3", "v2", "v1"}, ids)
	require.Contains(t, s.text(t, "#v3"), `"shipped"`)
	require.Contains(t, s.text(t, "#v1"), `"placed"`)
	s.shoot(t, "document")

	s.do(t, chromedp.Click(chromedp.CSS(`#v1 input[name="a"]`)))
	resp := s.submit(t, "#diff-button")
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Contains(t, resp.URL, "a=1")
	require.Contains(t, s.text(t, "main h1"), "version 1 → 3")
	require.Equal(t, "2 line(s) changed.", s.text(t, "#diff-summary"))
	dels := run(t, s, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#diff .del"), function (e) { return e.textContent.trim(); })`))
	adds := run(t, s, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#diff .add"), function (e) { return e.textContent.trim(); })`))
	require.Equal(t, []string{`-   "status": "placed",`}, dels)
	require.Equal(t, []string{`+   "status": "shipped",`}, adds)
	s.shoot(t, "diff")

	s.open(t, "/document?name=orders&id=o-17")
	s.do(t, chromedp.SendKeys(chromedp.CSS(`form.go input[name="v"]`), "2"))
	resp = s.submit(t, `main form.go button`)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Contains(t, s.text(t, "#asof"), "As of version 2: version 2")
	require.Contains(t, s.text(t, "#asof"), `"paid"`)
}

// The stream page's live tail shows events appended after the page
// loaded, newest first, as their commits wake the server's follower: the
// test waits for each row, never for a time.
func TestLiveTail(t *testing.T) {
	s := newSite(t)
	feed, err := versioned.NewFeed[click](s.db, nil)
	require.NoError(t, err)
	s.open(t, "/stream?name=audit")
	s.waitFor(t, `document.getElementById("tail-state").textContent === "live tail: connected"`)

	var ps []int64
	for _, page := range []string{"/live-1", "/live-2"} {
		p, err := feed.Append(s.db, "audit", click{Page: page})
		require.NoError(t, err)
		committed := time.Now()
		s.waitFor(t, fmt.Sprintf(`document.getElementById("e%d") !== null`, p))
		t.Logf("event %d shown %v after its commit", p, time.Since(committed))
		require.Contains(t, s.text(t, fmt.Sprintf("#e%d", p)), `{"page":"`+page+`"}`)
		ps = append(ps, p)
	}
	require.Equal(t, fmt.Sprintf("live tail: %d", ps[1]), s.text(t, "#tail-state"))
	first := run(t, s, chromedp.Evaluate[string](`document.querySelector("#events tr:nth-child(2)").id`))
	require.Equal(t, fmt.Sprintf("e%d", ps[1]), first, "the newest event is the first row")
	// Each event shows once.
	n := run(t, s, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll("#e%d, #e%d").length`, ps[0], ps[1])))
	require.Equal(t, 2, n)
}

// Requeue on a dead letter's form moves it back to the queue: the page
// it returns to shows one dead letter fewer and one message more, the
// store agrees, and the action was logged through the DB's logger.
// Discard asks for a confirmation first, then deletes it.
func TestRequeueAndDiscard(t *testing.T) {
	s := newSite(t)
	require.Equal(t, []int64{1}, deadLetters(t, s.jobs))
	s.open(t, "/queue?name=jobs")
	require.Equal(t, "1", s.text(t, "#dead"))
	require.Equal(t, "2", s.text(t, "#depth"))

	resp := s.submit(t, "#requeue-1")
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Equal(t, s.url+"/queue?name=jobs", resp.URL, "the form's back page")
	require.Equal(t, "0", s.text(t, "#dead"))
	require.Equal(t, "3", s.text(t, "#depth"))
	require.Contains(t, s.text(t, "main"), "No dead letter.")
	require.Empty(t, deadLetters(t, s.jobs))
	ms, err := s.jobs.Peek(10)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	require.Equal(t, "first", ms[2].Value, "requeued at the tail")
	acts := s.logs.actions()
	require.Len(t, acts, 1)
	require.Contains(t, acts[0], "level=INFO")
	require.Contains(t, acts[0], "action=requeue queue=jobs seqs=[1]")

	// Discard: the page asks, the test accepts.
	deadLetterAll(t, s.jobs)
	dead := deadLetters(t, s.jobs)
	require.Len(t, dead, 3)
	s.open(t, "/queue?name=jobs")
	require.Equal(t, "3", s.text(t, "#dead"))
	s.shoot(t, "queue-dead-letters")
	var asked sync.WaitGroup
	asked.Add(1)
	var question string
	go func() {
		for ev, err := range chromedp.Events(s.tab, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			question = ev.Message
			_, _ = chromedp.Call(s.tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			asked.Done()
			return
		}
	}()
	resp = s.submit(t, fmt.Sprintf("#discard-%d", dead[0]))
	asked.Wait()
	require.Equal(t, fmt.Sprintf("Discard dead letter %d for good?", dead[0]), question)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Equal(t, "2", s.text(t, "#dead"))
	require.Equal(t, dead[1:], deadLetters(t, s.jobs))
	acts = s.logs.actions()
	require.Len(t, acts, 2)
	require.Contains(t, acts[1], fmt.Sprintf("action=discard queue=jobs seqs=[%d]", dead[0]))
}

// A form posted without the page's token, or from another site even with
// the right token, is refused (403) and changes nothing; each refusal is
// logged.
func TestActionsRefused(t *testing.T) {
	s := newSite(t)
	s.open(t, "/queue?name=jobs")
	token := run(t, s, chromedp.Evaluate[string](`document.querySelector('#requeue-1').form.elements.token.value`))
	require.NotEmpty(t, token)

	// The same page, its form's token removed.
	s.do(t, chromedp.Evaluate[chromedp.Void](`document.querySelector('#requeue-1').form.elements.token.value = ""`))
	resp := s.submit(t, "#requeue-1")
	require.EqualValues(t, http.StatusForbidden, resp.Status)
	require.Contains(t, s.text(t, "body"), "CSRF token")
	require.Equal(t, []int64{1}, deadLetters(t, s.jobs))

	// Another site (localhost is not 127.0.0.1) with a copy of the form
	// and the token: the browser sends Sec-Fetch-Site: cross-site and
	// keeps the SameSite=Strict cookie back.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/api/requeue">
<input type="hidden" name="name" value="jobs"><input type="hidden" name="seq" value="1">
<input type="hidden" name="token" value="%s"><button id="go">Win a prize</button></form>`, s.url, token)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	resp = run(t, s, chromedp.NavigateResponse(evilURL))
	require.EqualValues(t, http.StatusOK, resp.Status)
	resp = s.submit(t, "#go")
	require.EqualValues(t, http.StatusForbidden, resp.Status)
	require.Contains(t, s.text(t, "body"), "another site")
	require.Equal(t, []int64{1}, deadLetters(t, s.jobs))

	acts := s.logs.actions()
	require.Len(t, acts, 2)
	for _, a := range acts {
		require.Contains(t, a, "level=WARN")
		require.Contains(t, a, "action=requeue queue=jobs seqs=[1]")
	}
}
