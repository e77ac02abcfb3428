package console

import (
	"time"
	"unicode/utf8"

	"github.com/tipkv/tipkv"
)

// The JSON endpoints answer with these types, encoded by encoding/json;
// each page shows the same value. Fields may be added in any release.
// Names and ids are JSON strings; one that is not valid UTF-8 (tipkv
// takes any bytes) also comes in hex, in the field of the same name with
// "_hex" added, because a JSON string cannot carry it exactly.

// Overview is GET /api/overview: the store at a glance.
type Overview struct {
	Engine    string        `json:"engine"` // "pebble", "etcd", "sql"
	Dir       string        `json:"dir"`    // where the DB was opened
	DiskUsage uint64        `json:"disk_usage"`
	Uptime    time.Duration `json:"uptime_ns"`
	// Collections and Streams count the names in the store, up to
	// countCap (More set: there are more): one seek per name.
	Collections     int  `json:"collections"`
	CollectionsMore bool `json:"collections_more,omitempty"`
	Streams         int  `json:"streams"`
	StreamsMore     bool `json:"streams_more,omitempty"`
	// Queues are every queue of the store with its figures.
	Queues []QueueSummary `json:"queues"`
	// Metrics are DB.Metrics as read for this request.
	Metrics tipkv.Metrics `json:"metrics"`
	// Charts says the console samples the metrics; Samples are the
	// readings kept, oldest first (as GET /api/samples gives them).
	Charts  bool     `json:"charts"`
	Samples []Sample `json:"samples"`
}

// Samples is GET /api/samples: the readings kept for the charts, oldest
// first.
type Samples struct {
	Interval time.Duration `json:"interval_ns"`
	Samples  []Sample      `json:"samples"`
}

// Names is GET /api/collections and /api/streams: a page of names in
// bytewise order. Next, when set, is the after of the next page.
type Names struct {
	Names []Name `json:"names"`
	Next  string `json:"next,omitempty"`
}

// Name is a collection, stream or queue name.
type Name struct {
	Name string `json:"name"`
	Hex  string `json:"name_hex,omitempty"`
}

func nameOf(s string) Name { return Name{Name: s, Hex: hexIfInvalid(s)} }

// hexIfInvalid returns s in hex if it is not valid UTF-8, else "".
func hexIfInvalid(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return hexString(s)
}

// Documents is GET /api/collection: a page of a collection's documents,
// each at its latest version, in id order (deleted documents skipped).
type Documents struct {
	Collection string     `json:"collection"`
	Prefix     string     `json:"prefix,omitempty"`
	Documents  []Document `json:"documents"`
	// Next is the cursor of the next page (after), "" at the end.
	Next string `json:"next,omitempty"`
}

// Document is one version of a document.
type Document struct {
	ID      string `json:"id"`
	IDHex   string `json:"id_hex,omitempty"`
	Version int64  `json:"version"`
	// Deleted marks a delete marker: Value is empty.
	Deleted bool  `json:"deleted,omitempty"`
	Value   Value `json:"value"`
	// Committed is the version's commit time (versioned.Doc.Time); nil
	// for a version written before store format 4, which has none.
	Committed *time.Time `json:"committed,omitempty"`
	// Metadata is what the write recorded (author, reason, ids,
	// headers); nil when it recorded none. A record that does not decode
	// is MetadataError.
	Metadata      *tipkv.Metadata `json:"metadata,omitempty"`
	MetadataError string          `json:"metadata_error,omitempty"`
}

// History is GET /api/document: a page of a document's versions, newest
// first, and the version as of V when asked.
type History struct {
	Collection string `json:"collection"`
	ID         string `json:"id"`
	IDHex      string `json:"id_hex,omitempty"`
	// Count is how many versions are kept, delete markers included.
	Count    int64      `json:"count"`
	Versions []Document `json:"versions"`
	Next     string     `json:"next,omitempty"`
	// AsOf is the version that was latest when version V was written,
	// when V was asked for; nil if there is none (see Collection.AsOf).
	V    int64     `json:"v,omitempty"`
	AsOf *Document `json:"as_of,omitempty"`
}

// Diff is GET /api/diff: versions A and B of a document, and the lines of
// their JSON renderings, as a unified diff without hunks.
type Diff struct {
	Collection string     `json:"collection"`
	ID         string     `json:"id"`
	IDHex      string     `json:"id_hex,omitempty"`
	A          Document   `json:"a"`
	B          Document   `json:"b"`
	Lines      []DiffLine `json:"lines"`
	// Changed counts the lines removed and added.
	Changed int `json:"changed"`
}

// Events is GET /api/stream: a page of a stream's events, newest first,
// and its consumer groups.
type Events struct {
	Stream string `json:"stream"`
	// Newest is the position of the newest event, 0 for an empty stream.
	Newest int64   `json:"newest"`
	Events []Event `json:"events"`
	Next   string  `json:"next,omitempty"`
	Groups []Group `json:"groups"`
}

// Event is one event of a stream. The live tail (GET /api/tail, text/
// event-stream) sends each as the data of an SSE event whose id is the
// position. Positions are nanoseconds since 1970, above 2^53: a
// JavaScript client that parses the JSON gets them rounded, and reads
// the exact position from the SSE event's id (lastEventId) instead.
type Event struct {
	Position int64     `json:"position"`
	Time     time.Time `json:"time"`
	Value    Value     `json:"value"`
}

// Group is a consumer group of a stream: its cursor, how far it trails
// the stream's newest event (0 when caught up), how many events it has
// pending (counted up to PendingMax; PendingMore when more follow) and
// the position of the oldest of them (0: none), as
// versioned.Feed.Backlog reads them.
type Group struct {
	Name          string        `json:"name"`
	NameHex       string        `json:"name_hex,omitempty"`
	Position      int64         `json:"position"`
	Lag           time.Duration `json:"lag_ns"`
	Pending       int           `json:"pending"`
	PendingMore   bool          `json:"pending_more,omitempty"`
	OldestPending int64         `json:"oldest_pending,omitempty"`
}

// PendingMax is how many pending events of a group the stream page
// counts, at most: counting walks their keys.
const PendingMax = 10_000

// Queues is GET /api/queues.
type Queues struct {
	Queues []QueueSummary `json:"queues"`
}

// QueueSummary is a queue's figures (queue.Stats, and its dead letters).
type QueueSummary struct {
	Name        string `json:"name"`
	NameHex     string `json:"name_hex,omitempty"`
	Head        int64  `json:"head"`
	Tail        int64  `json:"tail"`
	Depth       int    `json:"depth"`
	Leased      int    `json:"leased"`
	Delayed     int    `json:"delayed"`
	DeadLetters int    `json:"dead_letters"`
	// DeadLettersMore says there are more dead letters than counted.
	DeadLettersMore bool `json:"dead_letters_more,omitempty"`
	// Error is why the queue's figures could not be read, if they could
	// not.
	Error string `json:"error,omitempty"`
}

// QueuePage is GET /api/queue: a queue's figures, a page of its messages
// oldest first (Next: the after of the next page), and its oldest dead
// letters.
type QueuePage struct {
	QueueSummary
	Messages          []Message    `json:"messages"`
	Next              string       `json:"next,omitempty"`
	OldestDeadLetters []DeadLetter `json:"dead_letters_oldest"`
	// Actions says whether this console runs actions (requeue, discard).
	Actions bool `json:"actions"`
}

// Message is one message of a queue (queue.MessageInfo): GET
// /api/message, and the rows of QueuePage.
type Message struct {
	Seq      int64             `json:"seq"`
	State    string            `json:"state"` // "ready", "leased", "delayed" or "busy"
	Until    *time.Time        `json:"until,omitempty"`
	Attempts int               `json:"attempts"`
	Enqueued time.Time         `json:"enqueued"`
	Headers  map[string]string `json:"headers,omitempty"`
	Group    string            `json:"group,omitempty"` // the message group, if any
	Value    Value             `json:"value"`
}

// DeadLetter is one dead letter of a queue: GET /api/deadletter, and the
// dead letters of QueuePage.
type DeadLetter struct {
	Seq      int64             `json:"seq"`
	Attempts int               `json:"attempts"`
	Enqueued time.Time         `json:"enqueued"`
	Died     time.Time         `json:"died"`
	Headers  map[string]string `json:"headers,omitempty"`
	Group    string            `json:"group,omitempty"` // the message group, if any
	Value    Value             `json:"value"`
	// Error is why the dead letter does not read (its header is corrupt);
	// it can still be discarded.
	Error string `json:"error,omitempty"`
}

// ActionResult is the answer of POST /api/requeue and /api/discard.
type ActionResult struct {
	Action string  `json:"action"`
	Queue  string  `json:"queue"`
	Seqs   []int64 `json:"seqs"`
}

// Token is GET /api/token: the CSRF token a client that is not a browser
// sends with actions (form field "token" or header X-Console-Token),
// together with the cookie this response sets.
type Token struct {
	Token string `json:"token"`
}
