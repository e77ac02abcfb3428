package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// view reads what a page shows: the same value is the page's data and the
// JSON endpoint's answer.
type view func(r *http.Request, p params) (any, error)

// route is one page and its JSON endpoint: GET /path and GET /api/path.
type route struct {
	path   string   // "" for the overview ("/" and "/api/overview")
	page   string   // its template
	title  string   // for the page's title and navigation
	params []string // the query parameters it takes
	view   view
}

func (c *Console) routes() {
	c.mux = http.NewServeMux()
	for _, rt := range []route{
		{"", "overview", "Overview", nil, c.viewOverview},
		{"collections", "names", "Collections", []string{pAfter, pLimit}, c.viewCollections},
		{"collection", "collection", "Collection", []string{pName, pPrefix, pAfter, pLimit}, c.viewCollection},
		{"document", "document", "Document", []string{pName, pID, pAfter, pLimit, pVersion}, c.viewDocument},
		{"diff", "diff", "Diff", []string{pName, pID, pA, pB}, c.viewDiff},
		{"streams", "names", "Feeds", []string{pAfter, pLimit}, c.viewStreams},
		{"stream", "stream", "Stream", []string{pName, pAfter, pLimit}, c.viewStream},
		{"queues", "queues", "Queues", nil, c.viewQueues},
		{"queue", "queue", "Queue", []string{pName, pAfter, pLimit}, c.viewQueue},
		{"message", "message", "Message", []string{pName, pSeq}, c.viewMessage},
		{"deadletter", "deadletter", "Dead letter", []string{pName, pSeq}, c.viewDeadLetter},
	} {
		pagePath, apiPath := "/"+rt.path, "/api/"+rt.path
		if rt.path == "" {
			pagePath, apiPath = "/{$}", "/api/overview"
		}
		c.mux.HandleFunc("GET "+pagePath, c.page(rt))
		c.mux.HandleFunc("GET "+apiPath, c.api(rt))
	}
	c.mux.HandleFunc("GET /api/samples", c.api(route{view: c.viewSamples}))
	c.mux.HandleFunc("GET /api/tail", c.tail)
	c.mux.HandleFunc("GET /api/token", c.token)
	c.mux.HandleFunc("POST /api/requeue", c.action("requeue"))
	c.mux.HandleFunc("POST /api/discard", c.action("discard"))
	for _, a := range []string{"/api/requeue", "/api/discard"} {
		c.mux.HandleFunc(a, postOnly)
	}
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", staticFiles()))
	c.mux.HandleFunc("/", c.notFound)
}

// api serves rt's JSON endpoint.
func (c *Console) api(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := parseParams(r.URL.RawQuery, rt.params...)
		if err == nil {
			err = c.checkOpen()
		}
		var v any
		if err == nil {
			v, err = rt.view(r, p)
		}
		if err != nil {
			c.jsonError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// page serves rt's page.
func (c *Console) page(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := parseParams(r.URL.RawQuery, rt.params...)
		if err == nil {
			err = c.checkOpen()
		}
		var v any
		if err == nil {
			v, err = rt.view(r, p)
		}
		if err != nil {
			c.pageError(w, r, err)
			return
		}
		c.render(w, r, http.StatusOK, rt.page, rt.title, p, v)
	}
}

// postOnly answers an action's route asked with another method.
func postOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "console: an action is a POST", Status: http.StatusMethodNotAllowed})
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	err := errNoRoute
	if strings.HasPrefix(r.URL.Path, "/api/") {
		c.jsonError(w, err)
		return
	}
	c.pageError(w, r, err)
}

// statusOf is the HTTP status of an error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errNoRoute), errors.Is(err, tipkv.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errReadOnly), errors.Is(err, errToken), errors.Is(err, errRefused):
		return http.StatusForbidden
	case errors.Is(err, tipkv.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, queue.ErrLeaseLost), errors.Is(err, tipkv.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, tipkv.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiError is the body of every JSON error.
type apiError struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

func (c *Console) jsonError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	writeJSON(w, st, apiError{Error: err.Error(), Status: st})
}

func (c *Console) pageError(w http.ResponseWriter, r *http.Request, err error) {
	st := statusOf(err)
	c.render(w, r, st, "error", http.StatusText(st), params{}, apiError{Error: err.Error(), Status: st})
}

// writeJSON writes v as the response, indented for people who curl it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(&buf).Encode(apiError{Error: "console: " + err.Error(), Status: status})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
