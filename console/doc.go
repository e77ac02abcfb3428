// Package console is a web console of a tipkv store: an http.Handler that
// a service mounts on its own mux, next to its handlers, to look at the
// DB it has open (documents and their histories, feeds and their consumer
// groups, queues and their dead letters, the engine's figures) and, when
// the service allows it, to requeue or discard dead letters.
//
//	c, err := console.New(db, &console.Options{Prefix: "/console"})
//	if err != nil { ... }
//	defer c.Close()
//	mux.Handle("/console/", requireOperator(c)) // the service's own auth middleware
//
// It reads the DB through tipkv's packages (versioned and queue, with
// codec.Raw), as any code of the service would, so it works on a live
// Pebble store and on the shared engines (etcd, PostgreSQL) alike. It is
// built on Go's standard library (net/http, html/template, embed,
// encoding/json) and adds no dependency to tipkv's (it reads msgpack
// values with the msgpack module tipkv's codec already uses); its pages
// work without JavaScript, and a small script of
// its own (no library, no build step) adds the live tail and keeps the
// charts current.
//
// # Pages and endpoints
//
// Every page has a JSON endpoint under /api/ that answers the same value
// (the types of api.go), for scripts and for the tipkv command. Names and
// ids travel as query parameters (name, id), never in the path, so that
// they may hold any bytes. Every listing is paged (limit, after: the next
// page's after is in the answer) and reads one seek per item: no page
// scans a collection, a stream or a queue.
//
//	/                      GET /api/overview     size on disk, names, queues, DB.Metrics, charts
//	                       GET /api/samples      the metrics sampled over the last minutes
//	/collections           GET /api/collections  collection names
//	/collection?name=      GET /api/collection   latest version of each document, by id (prefix=)
//	/document?name=&id=    GET /api/document     history newest first; v=: the version as of v
//	/diff?name=&id=&a=&b=  GET /api/diff         two versions' JSON, line by line
//	/streams               GET /api/streams      stream names
//	/stream?name=          GET /api/stream       newest events, consumer groups with lag
//	                       GET /api/tail         live tail: server-sent events (Feed.Follow)
//	/queues                GET /api/queues       every queue's figures
//	/queue?name=           GET /api/queue        figures, messages (any state), oldest dead letters
//	/message?name=&seq=    GET /api/message      one message: state, lease, attempts, headers
//	/deadletter?name=&seq= GET /api/deadletter   one dead letter
//	                       POST /api/requeue     actions (see below)
//	                       POST /api/discard
//	                       GET /api/token        a CSRF token for clients that are not browsers
//
// Errors are answered with their status and, on /api/, a JSON object
// {"error": ..., "status": ...}: 400 for a bad parameter (every parameter
// is checked; unknown ones are refused), 404 for a name, document,
// version or message that is not there, 403 for a refused action, 409
// for an action that lost a race, 503 once the DB has closed.
//
// Values are rendered as JSON through a Renderer per collection, stream or
// queue (Options.Render): by default MsgpackRenderer, which reads
// tipkv's default codec whatever type wrote it; CodecRenderer uses a codec
// of the service's. A value that does not render shows as JSON (if it is),
// text or hex, and every value is cut at Options.MaxValueBytes.
//
// A document's history shows each version's commit time and the author
// and reason its write recorded (tipkv.WithMetadata), and the JSON carries
// them whole (Document.Committed, Document.Metadata); a version written
// before store format 4 has no time.
//
// # Live tail
//
// GET /api/tail?name=STREAM streams the events appended to a stream as
// server-sent events, each within a commit's wake-up of its Append: it
// reads with Feed.Follow, which sleeps until a commit appends to the
// stream (on Pebble nothing polls; on a shared engine Follow's own watch
// or poll interval applies). Each SSE event is named "event", its data is
// an Event in JSON and its id the position, exact as text (JavaScript
// numbers round positions, which are above 2^53); a browser that
// reconnects sends it back as Last-Event-ID and misses nothing. A tail
// that ends with the DB gets an "error" event. A quiet tail sends a
// comment every 15 seconds to keep the connection.
//
// # Actions, and keeping them safe
//
// A Console is read-only unless Options.Authorize is set. Then the queue
// and dead-letter pages offer Requeue and Discard, which POST a form to
// /api/requeue or /api/discard (fields: name, seq, token, and back for a
// page to return to). An action runs only if
//
//   - it is a POST whose token matches the browser's console cookie (a
//     signed double-submit cookie: HttpOnly, SameSite=Strict; another site
//     can make a browser send the cookie, never read the token), and does
//     not come from another site (Sec-Fetch-Site);
//   - Options.Authorize, given the request and the Action, returns nil.
//
// Every action, run or refused, logs one line (event "console-action")
// through Options.Logger, by default the DB's tipkv.Options.Logger; New
// refuses Authorize without a logger. The Console does not authenticate
// anyone: put it behind the service's authentication middleware, and
// check rights in Authorize with what the middleware put in the request:
//
//	c, err := console.New(db, &console.Options{
//		Prefix: "/console",
//		Authorize: func(r *http.Request, a console.Action) error {
//			if !userFrom(r.Context()).IsOperator() {
//				return errors.New("operators only")
//			}
//			return nil
//		},
//	})
//	mux.Handle("/console/", authMiddleware(c))
//
// Responses carry a Content-Security-Policy that allows the console's own
// script and style only, and forbid framing.
//
// # Tests
//
// The package's own tests call every endpoint with httptest; module
// github.com/tipkv/tipkv/console/e2e drives the pages, the live tail and
// the actions in headless Chromium.
package console
