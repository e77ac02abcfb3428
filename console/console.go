package console

import (
	"context"
	"crypto/rand"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Options configure a Console. A nil *Options is valid and means the
// defaults: a read-only console at the root of its mux.
type Options struct {
	// Prefix is the path the Console is mounted under, without a
	// trailing slash ("/console"): the Console strips it from every
	// request and starts every link it writes with it, so mount it with
	// mux.Handle(Prefix+"/", console), not behind http.StripPrefix. The
	// default is "": the Console serves the root.
	Prefix string

	// Authorize, when set, turns actions on (requeue and discard of dead
	// letters): every action is a POST that carries the Console's CSRF
	// token, and runs only if Authorize, called with its request and what
	// it would do, returns nil; its error is the refusal (403) shown to
	// the caller. Put the Console behind the service's authentication
	// middleware and check the caller's rights here (see the package doc).
	// The default (nil) is a read-only Console: every action is refused
	// with 403 and no page offers one.
	Authorize func(r *http.Request, a Action) error

	// Logger receives one line for every action, run or refused (event
	// "console-action": the action, queue, sequence numbers, the remote
	// address and the outcome). The default is the DB's logger
	// (tipkv.Options.Logger). With Authorize set and neither logger given,
	// New fails: no action runs without a log line.
	Logger *slog.Logger

	// Render returns the Renderer of the values of a collection, stream
	// or queue, nil for the default (MsgpackRenderer, for tipkv's default
	// codec; values that are not msgpack show as JSON, text or hex). Use
	// CodecRenderer for a codec of your own. It is called once per page
	// and name, and must be safe for concurrent use. The default is nil:
	// MsgpackRenderer everywhere.
	Render func(kind Kind, name string) Renderer

	// MaxValueBytes is how many bytes of a value's JSON a page or
	// endpoint shows; a longer value is cut and marked truncated, and one
	// over 4 x MaxValueBytes stored is not decoded at all. The default is
	// 64 KiB.
	MaxValueBytes int

	// SampleInterval is the time between two readings of DB.Metrics for
	// the overview's charts, which show the last Samples of them (a
	// goroutine reads them until Close or the DB closes). Below zero
	// nothing is sampled and the overview has no charts. The default is
	// 5 seconds.
	SampleInterval time.Duration

	// Samples is how many readings the charts keep. The default is 120
	// (10 minutes at the default interval).
	Samples int
}

// Kind names what a Renderer renders the values of.
type Kind string

// The kinds of names whose values the console renders.
const (
	KindCollection Kind = "collection"
	KindStream     Kind = "stream"
	KindQueue      Kind = "queue"
)

// Action is what an action would do, as Options.Authorize is asked about
// it.
type Action struct {
	// Name is "requeue" (move dead letters back to the queue's tail) or
	// "discard" (delete dead letters).
	Name string
	// Queue is the queue acted on.
	Queue string
	// Seqs are the dead letters' sequence numbers.
	Seqs []int64
}

// Console is a web console of one DB: an http.Handler that serves pages
// for people and JSON for tools (see the package doc for the routes).
// It is safe for concurrent use; every request reads the DB as it is at
// that moment. Close it before the DB, or let the DB's Close end it.
type Console struct {
	db     *tipkv.DB
	opts   Options
	log    *slog.Logger // nil: no actions
	secret []byte       // keys CSRF tokens
	mux    *http.ServeMux
	pages  map[string]*template.Template
	samp   *sampler // nil: no charts

	ctx    context.Context // ends at Close: live tails end with it
	cancel context.CancelFunc

	mu     sync.Mutex
	colls  map[string]*versioned.Collection[[]byte]
	queues map[string]*queue.Queue[[]byte]
	feed   *versioned.Feed[[]byte]
}

// New returns a Console of db. Its options are checked here: a Prefix that
// does not start with "/" or ends with one, or Authorize without a logger
// to log actions to, is an error that matches tipkv.ErrInvalid.
func New(db *tipkv.DB, opts *Options) (*Console, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: console: nil DB", tipkv.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix != "" && (!strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/")) {
		return nil, fmt.Errorf("%w: console: Prefix %q must start with / and not end with one", tipkv.ErrInvalid, o.Prefix)
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 64 << 10
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = 5 * time.Second
	}
	if o.Samples <= 0 {
		o.Samples = 120
	}
	c := &Console{
		db:     db,
		opts:   o,
		colls:  map[string]*versioned.Collection[[]byte]{},
		queues: map[string]*queue.Queue[[]byte]{},
	}
	if o.Authorize != nil {
		c.log = o.Logger
		if c.log == nil {
			ln, err := link.Of(db)
			if err != nil {
				return nil, fmt.Errorf("console: %w", err)
			}
			if ln.Logger != link.Discard {
				c.log = ln.Logger
			}
		}
		if c.log == nil {
			return nil, fmt.Errorf("%w: console: actions (Authorize) need a logger: set tipkv.Options.Logger or console.Options.Logger", tipkv.ErrInvalid)
		}
	}
	c.secret = make([]byte, 32)
	if _, err := rand.Read(c.secret); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	feed, err := versioned.NewFeed(db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c.feed = feed
	c.pages, err = parsePages()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if o.SampleInterval > 0 {
		c.samp = newSampler(db, o.SampleInterval, o.Samples)
		go c.samp.run(c.ctx.Done())
	}
	c.routes()
	return c, nil
}

// Close stops the sampling goroutine and ends every live tail. Requests
// after it are still served. It never fails.
func (c *Console) Close() error {
	c.cancel()
	return nil
}

// ServeHTTP serves the console's pages, JSON endpoints and assets under
// Options.Prefix, and 404 elsewhere.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if c.opts.Prefix != "" {
		rest, ok := strings.CutPrefix(path, c.opts.Prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			http.NotFound(w, r)
			return
		}
		if rest == "" {
			http.Redirect(w, r, c.opts.Prefix+"/", http.StatusMovedPermanently)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = rest, ""
		r2.URL = &u
		r = r2
	}
	securityHeaders(w.Header())
	c.mux.ServeHTTP(w, r)
}

// securityHeaders keeps pages from being framed (clickjacking of the
// action buttons), sniffed or given scripts from elsewhere.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

// collection returns the console's handle on collection name, or an
// error matching tipkv.ErrNotFound when the store holds no version of it
// (so that a mistyped name does not register metrics for a collection
// that does not exist).
func (c *Console) collection(name string) (*versioned.Collection[[]byte], error) {
	c.mu.Lock()
	h := c.colls[name]
	c.mu.Unlock()
	if h != nil {
		return h, nil
	}
	if ok, err := hasDocuments(c.db, name); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("%w: no collection %q (it holds no document)", tipkv.ErrNotFound, name)
	}
	h, err := versioned.NewCollection(c.db, name, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.colls) >= maxHandles {
		clear(c.colls)
	}
	c.colls[name] = h
	return h, nil
}

// maxHandles bounds the handles the console keeps per kind: they are
// cheap to make again.
const maxHandles = 1024

// hasDocuments reports whether the collection holds a version, live or
// not: LatestAll skips deleted documents, so it asks the names instead.
func hasDocuments(db *tipkv.DB, name string) (bool, error) {
	for n, err := range versioned.Collections(db) {
		if err != nil {
			return false, err
		}
		if n >= name {
			return n == name, nil
		}
	}
	return false, nil
}

// queueHandle returns the console's handle on queue name, or an error
// matching tipkv.ErrNotFound when the store holds nothing of it.
func (c *Console) queueHandle(name string) (*queue.Queue[[]byte], error) {
	c.mu.Lock()
	h := c.queues[name]
	c.mu.Unlock()
	if h != nil {
		return h, nil
	}
	found := false
	for n, err := range queue.Names(c.db) {
		if err != nil {
			return nil, err
		}
		if n >= name {
			found = n == name
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: no queue %q", tipkv.ErrNotFound, name)
	}
	h, err := queue.Open(c.db, name, &queue.Options[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queues) >= maxHandles {
		clear(c.queues)
	}
	c.queues[name] = h
	return h, nil
}

// renderer returns the Renderer of name's values.
func (c *Console) renderer(k Kind, name string) Renderer {
	if c.opts.Render == nil {
		return nil
	}
	return c.opts.Render(k, name)
}

// value renders raw with r within the console's limit.
func (c *Console) value(r Renderer, raw []byte) Value {
	return renderValue(r, raw, c.opts.MaxValueBytes)
}

// checkOpen fails with ErrClosed once the DB has closed, before a page
// that would only read names finds out.
func (c *Console) checkOpen() error {
	select {
	case <-c.db.Done():
		return fmt.Errorf("console: %w", tipkv.ErrClosed)
	default:
		return nil
	}
}
