package console

import (
	"bytes"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticFiles serves the stylesheet and the script, both small and
// written for the console (no third-party code, no build step).
func staticFiles() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded directory is there: a build error otherwise
	}
	fsrv := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		fsrv.ServeHTTP(w, r)
	})
}

// pageTemplates are the page templates; each defines "content" and is parsed
// with layout.html.
var pageTemplates = []string{"overview", "names", "collection", "document", "diff", "stream", "queues", "queue", "message", "deadletter", "error"}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range pageTemplates {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// pageData is what every page template gets.
type pageData struct {
	Title   string
	Kind    string // the page template
	Prefix  string
	Token   string // the CSRF token, "" on a read-only console
	Actions bool
	P       params
	Data    any
	Here    string // the page's path and query in the console, for back
}

// render writes a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page, title string, p params, data any) {
	d := pageData{Title: title, Kind: page, Prefix: c.opts.Prefix, Actions: c.opts.Authorize != nil, P: p, Data: data}
	d.Here = r.URL.Path
	if r.URL.RawQuery != "" {
		d.Here += "?" + r.URL.RawQuery
	}
	if d.Actions {
		d.Token = c.tokenFor(w, r)
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout.html", d); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, "<!doctype html><title>console error</title><p>%s</p>", template.HTMLEscapeString(err.Error()))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

var funcs = template.FuncMap{
	"link":   pageLink,
	"show":   show,
	"time":   showTime,
	"ptime":  func(t *time.Time) string { return showTimeP(t) },
	"ago":    ago,
	"dur":    showDur,
	"bytes":  func(n any) string { return showBytes(toUint(n)) },
	"spark":  spark,
	"last":   lastOf,
	"add":    func(a, b int64) int64 { return a + b },
	"pct":    func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"pair":   func(a, b any) pairOf { return pairOf{a, b} },
	"unixns": func(n int64) time.Time { return time.Unix(0, n) },
}

// pairOf passes two values to a template.
type pairOf struct{ A, B any }

// pageLink builds a console URL: prefix, path, and the query of the key/value
// pairs (values may be strings or numbers; zero and empty ones are left
// out).
func pageLink(prefix, path string, kv ...any) template.URL {
	vs := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		k := fmt.Sprint(kv[i])
		switch v := kv[i+1].(type) {
		case string:
			if v != "" {
				vs.Add(k, v)
			}
		case int64:
			if v != 0 {
				vs.Add(k, strconv.FormatInt(v, 10))
			}
		case int:
			if v != 0 {
				vs.Add(k, strconv.Itoa(v))
			}
		default:
			vs.Add(k, fmt.Sprint(v))
		}
	}
	u := prefix + path
	if len(vs) > 0 {
		u += "?" + vs.Encode()
	}
	// Safe: built from a fixed path and escaped values.
	return template.URL(u)
}

// show is a name or id as people read it: as it is when it is printable
// UTF-8, else quoted with Go escapes.
func show(s string) string {
	if s == "" {
		return `""`
	}
	if utf8.ValidString(s) {
		ok := true
		for _, r := range s {
			if !unicode.IsPrint(r) {
				ok = false
				break
			}
		}
		if ok {
			return s
		}
	}
	return strconv.Quote(s)
}

func hexString(s string) string { return hex.EncodeToString([]byte(s)) }

func showTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000000000Z")
}

func showTimeP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return showTime(*t)
}

// ago is how long before now t was, or "in ..." for a future time.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + showDur(-d)
	}
	return showDur(d) + " ago"
}

func showDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return d.String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// toUint is a number of bytes of any integer type, 0 if negative.
func toUint(n any) uint64 {
	switch n := n.(type) {
	case uint64:
		return n
	case int64:
		return uint64(max(n, 0))
	case int:
		return uint64(max(n, 0))
	}
	return 0
}

func showBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + []string{"", "KiB", "MiB", "GiB", "TiB"}[i]
}

// chart is one sparkline of the overview: its samples scaled into a
// 240x48 box as SVG polyline points.
type chart struct {
	Title  string
	Key    string // the Sample's JSON field, for the script's redraws
	Points string
	Last   string
}

// chartW and chartH are a sparkline's box.
const (
	chartW = 240
	chartH = 48
)

// spark draws the overview's charts from the samples.
func spark(ss []Sample) []chart {
	type series struct {
		title, key string
		get        func(Sample) float64
		show       func(float64) string
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
	byteStr := func(f float64) string { return showBytes(uint64(f)) }
	all := []series{
		{"Disk usage", "disk_usage", func(s Sample) float64 { return float64(s.DiskUsage) }, byteStr},
		{"Writes / s", "writes_per_second", func(s Sample) float64 { return s.Writes }, num},
		{"Deliveries / s", "deliveries_per_second", func(s Sample) float64 { return s.Deliveries }, num},
		{"Queue depth", "depth", func(s Sample) float64 { return float64(s.Depth) }, num},
		{"Dead letters", "dead_letters", func(s Sample) float64 { return float64(s.DeadLetters) }, num},
		{"Cache hit rate", "cache_hit_rate", func(s Sample) float64 { return s.CacheHitRate }, func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }},
		{"Read amplification", "read_amp", func(s Sample) float64 { return float64(s.ReadAmp) }, num},
		{"Compaction debt", "compaction_debt", func(s Sample) float64 { return float64(s.CompactionDebt) }, byteStr},
	}
	out := make([]chart, len(all))
	for i, se := range all {
		out[i] = chart{Title: se.title, Key: se.key, Last: "—"}
		if len(ss) == 0 {
			continue
		}
		hi := 0.0
		for _, s := range ss {
			hi = max(hi, se.get(s))
		}
		var pts strings.Builder
		for j, s := range ss {
			x := float64(chartW)
			if len(ss) > 1 {
				x = float64(j) * chartW / float64(len(ss)-1)
			}
			y := float64(chartH)
			if hi > 0 {
				y = chartH - se.get(s)/hi*(chartH-2) - 1
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
		}
		out[i].Points = strings.TrimSpace(pts.String())
		out[i].Last = se.show(se.get(ss[len(ss)-1]))
	}
	return out
}

func lastOf(ss []Sample) *Sample {
	if len(ss) == 0 {
		return nil
	}
	return &ss[len(ss)-1]
}
