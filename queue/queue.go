package queue

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

// Limits on input. Larger names or values are refused with an error that
// matches tipkv.ErrInvalid, and nothing is written.
const (
	// MaxNameSize is the longest queue name, in bytes.
	MaxNameSize = 256 // as for collections and streams
	// MaxValueSize is the largest encoded message value, in bytes.
	MaxValueSize = 1 << 20
)

// DefaultMaxAttempts is Options.MaxAttempts when it is zero.
const DefaultMaxAttempts = 10

// Options configure a Queue handle. A nil *Options is valid and means the
// defaults.
type Options[T any] struct {
	// Codec encodes message values. Every handle of one queue must use
	// the same codec. The default is codec.Msgpack[T], naming struct
	// fields as the store does (codec.Msgpack[T]{IgnoreJSONTags: true} on
	// a store created at format 1, before json tags were honoured).
	Codec codec.Value[T]

	// MaxAttempts is how many times a message may be delivered (by
	// Receive or Pop). A message that has been delivered MaxAttempts times
	// and becomes visible again moves to the dead-letter queue the next
	// time a Receive or Pop reaches it, instead of being delivered. A
	// negative value means no limit. The default is DefaultMaxAttempts.
	MaxAttempts int

	// Backoff is how long Retry keeps a message invisible after a failed
	// delivery, given its deliveries so far (1 after the first). A result
	// <= 0 makes it visible at once. It is called without locks held and
	// must be safe for concurrent use. The default is DefaultBackoff.
	Backoff func(attempts int) time.Duration

	// GroupWindow is how many messages of one message group may be out
	// at once: a group's message is delivered only while fewer than
	// GroupWindow of the group's messages before it are still in the
	// queue (leased, ready again, delayed or retried). 1 delivers each
	// group's messages one at a time, in order. It holds for messages
	// enqueued with EnqueueOptions.Group; others are not held back (see
	// "Message groups" in the package doc). Every handle of one queue,
	// in every process, must use the same window: on Pebble, Open of a
	// queue already open in the DB with another window is
	// tipkv.ErrInvalid. The default is DefaultGroupWindow.
	GroupWindow int
}

// Queue is a handle on one FIFO queue in a DB: messages of type T, oldest
// first, delivered at least once (Receive, Ack) or at most once (Pop).
//
// Handles are cheap and safe for concurrent use by many goroutines; every
// handle of one name in one DB shares the queue's state. The handle is
// usable until the DB closes; then every call returns tipkv.ErrClosed.
type Queue[T any] struct {
	c           *core
	codec       codec.Value[T]
	maxAttempts int
	maxValue    int // MaxValueSize, or less on a shared engine with small batches
	backoff     func(attempts int) time.Duration
	// raw is set when T is []byte and the codec codec.Raw: a delivery then
	// hands out the payload it copied from the store without copying it
	// again.
	raw bool
}

// Open returns a handle on the queue called name in db, creating nothing
// on disk until the first Enqueue. On Pebble, the first Open of a queue in
// a DB loads its state: a read of its state key, a seek to its oldest
// message, a walk over the messages enqueued since the state key last
// counted them (none after a clean DB.Close; after a crash, those enqueued
// since the last consume), and a walk over
// its dead letters; a queue last written by a version without counts is
// walked in full, once. On a shared engine it reads nothing.
func Open[T any](db *tipkv.DB, name string, opts *Options[T]) (*Queue[T], error) {
	if name == "" {
		return nil, fmt.Errorf("%w: queue: empty name", tipkv.ErrInvalid)
	}
	if len(name) > MaxNameSize {
		return nil, fmt.Errorf("%w: queue %.32q...: name is %d bytes, over the %d-byte limit", tipkv.ErrInvalid, name, len(name), MaxNameSize)
	}
	q := &Queue[T]{maxAttempts: DefaultMaxAttempts, maxValue: MaxValueSize, backoff: DefaultBackoff}
	if opts != nil {
		if opts.Codec != nil {
			q.codec = opts.Codec
		}
		if opts.Backoff != nil {
			q.backoff = opts.Backoff
		}
		if opts.MaxAttempts != 0 {
			q.maxAttempts = opts.MaxAttempts
		}
	}
	if q.maxAttempts < 0 {
		q.maxAttempts = 0 // no limit
	}
	window := DefaultGroupWindow
	if opts != nil && opts.GroupWindow != 0 {
		window = opts.GroupWindow
	}
	if window < 1 {
		return nil, fmt.Errorf("%w: queue %q: group window %d: want >= 1", tipkv.ErrInvalid, name, window)
	}
	c, err := coreFor(db, name)
	if err != nil {
		return nil, err
	}
	if err := c.setWindow(window); err != nil {
		return nil, err
	}
	if q.codec == nil {
		q.codec = codec.Msgpack[T]{IgnoreJSONTags: c.ln.LegacyNames}
	}
	if c.sm != nil {
		q.maxValue = c.sm.maxValue
	}
	_, q.raw = any(q.codec).(codec.Raw)
	q.c = c
	return q, nil
}

// Name returns the queue's name.
func (q *Queue[T]) Name() string { return q.c.name }

// Enqueue appends items to the queue, in order, through w: a *tipkv.DB
// commits them at once, a *tipkv.Batch commits them with the rest of its
// Update (the transactional outbox). It returns the sequence number of the
// first item: the items get first, first+1, ..., first+len(items)-1, in
// order, the numbers their Message.Seq carries (and ID.Seq, Inspect,
// DeadLetters, Requeue and Discard use). With no items it writes nothing
// and returns 0; with an error it returns 0.
//
// On Pebble, sequence numbers come from memory: Enqueue reads nothing and
// never waits for other writers, and the items become visible to Receive,
// Peek, Pop and Wait once the commit has returned and every
// earlier-numbered enqueue has committed or failed. On a shared engine
// the numbers are assigned at commit: Enqueue reads the queue's state key
// and requires it unchanged when the batch commits. If another process
// enqueued first, an Enqueue on a *tipkv.DB reads again and retries at
// once, and returns the numbers of the write that committed; inside an
// Update, the Update's function runs again (see tipkv.DB.Update), so keep
// it free of other side effects. The items are visible once the commit
// is.
//
// Inside an Update the numbers are returned before the Update commits:
// they are the items' once the Update returns nil. Calls in one Update
// get ranges in call order: consecutive on a shared engine; on Pebble
// too, unless an enqueue of another goroutine took numbers between them.
// Where the function runs more than once (on a shared engine, or on
// Pebble after an EnqueueOnce lost a race), each run's calls return that
// run's numbers, and the last run is the one committed. If the Update
// fails, no message has its numbers: on Pebble, where they are taken
// from memory at the call, they are skipped (a gap in the queue), and no
// later enqueue takes them, after a Close and Open too (after a crash,
// one may); on a shared engine, where they come from the stored tail at
// commit, a later enqueue takes them.
//
// An item whose encoding is over MaxValueSize (on a shared engine, over
// half of what one batch of the engine holds, less a margin: a delivery
// writes a message twice) is refused with tipkv.ErrInvalid; then none of
// items is written.
func (q *Queue[T]) Enqueue(w tipkv.Writer, items ...T) (first int64, err error) {
	return q.enqueue(w, time.Time{}, nil, nil, items)
}

// EnqueueAt is Enqueue for messages that stay invisible until at, by the
// DB's clock (tipkv.Options.Clock); the zero time means now. A delayed
// message keeps its place in the queue: it holds the head, so the queue's
// memory of delivered messages grows with the number of messages consumed
// behind it until it is consumed, and the first Receive after a restart
// steps over those consumed messages once. Use delays of seconds to
// hours, not months. It returns the first item's sequence number, as
// Enqueue does.
//
// Times are stored as Unix nanoseconds: a time before 1970 or after
// 2262-04-11T23:47:16.854775807Z is refused with tipkv.ErrInvalid, and
// nothing is written. The same holds for every time a queue computes: a
// lease, delay or backoff that would end after that is refused by the call
// that asks for it, and so is every call while the clock reads a time
// outside that range.
func (q *Queue[T]) EnqueueAt(w tipkv.Writer, at time.Time, items ...T) (first int64, err error) {
	return q.enqueue(w, at, nil, nil, items)
}

// Headers are metadata that travel with a message beside its value:
// string keys and values the queue stores and hands back unchanged, such
// as trace context ("traceparent" and "tracestate" of W3C Trace Context),
// so that a consumer's span can link to the producer's. Producers set them
// with EnqueueWith; Receive, Pop, Peek and DeadLetters return them in
// Message.Headers (DeadLetter.Headers), and Requeue keeps them. Their
// encoding (keys, values and two lengths each) is at most MaxHeadersSize
// bytes per message.
type Headers map[string]string

// MaxHeadersSize is the largest encoding of one message's Headers, in
// bytes: each pair takes its key and value and a length of each (one byte
// under 128).
const MaxHeadersSize = queuefmt.MaxHeadersSize

// EnqueueOptions are the options of EnqueueWith. The zero value means
// Enqueue's behaviour.
type EnqueueOptions struct {
	// At makes the messages invisible until then, as EnqueueAt does.
	At time.Time
	// Headers are stored with every message of the call. A message
	// without headers costs nothing for them.
	Headers Headers
	// Group puts every message of the call in the message group of that
	// key: a group's messages are delivered in order, at most
	// Options.GroupWindow of them at a time, while different groups go on
	// in parallel (see "Message groups" in the package doc). The empty
	// string is no group. A key over MaxGroupSize bytes is
	// tipkv.ErrInvalid.
	Group string
}

// MaxGroupSize is the longest message group key, in bytes.
const MaxGroupSize = queuefmt.MaxGroupSize

// EnqueueWith is Enqueue with options: headers, such as trace context,
// stored with each message, and a visible-at time. It returns the first
// item's sequence number, as Enqueue does. Headers whose encoding is over
// MaxHeadersSize are tipkv.ErrInvalid, and nothing is written.
func (q *Queue[T]) EnqueueWith(w tipkv.Writer, opts EnqueueOptions, items ...T) (first int64, err error) {
	hs, err := encodeHeaders(opts.Headers)
	if err == nil {
		err = checkGroup(opts.Group)
	}
	if err != nil {
		return 0, fmt.Errorf("queue %q: enqueue: %w", q.c.name, err)
	}
	return q.enqueue(w, opts.At, hs, []byte(opts.Group), items)
}

// checkGroup checks a message group key given to an enqueue.
func checkGroup(g string) error {
	if len(g) > MaxGroupSize {
		return fmt.Errorf("%w: group key of %d bytes, over the %d-byte limit", tipkv.ErrInvalid, len(g), MaxGroupSize)
	}
	return nil
}

// encodeHeaders encodes h in queuefmt's pairs, sorted by key.
func encodeHeaders(h Headers) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []byte
	for _, k := range keys {
		out = queuefmt.AppendPair(out, k, h[k])
		if len(out) > MaxHeadersSize {
			return nil, fmt.Errorf("%w: headers over the %d-byte limit", tipkv.ErrInvalid, MaxHeadersSize)
		}
	}
	return out, nil
}

// decodeHeaders is the Headers of encoded pairs (checked when the value
// was parsed); nil for none.
func decodeHeaders(b []byte) Headers {
	if len(b) == 0 {
		return nil
	}
	h := Headers{}
	queuefmt.Pairs(b, func(k, v []byte) { h[string(k)] = string(v) })
	return h
}

// enqueue encodes items and writes them through w, and returns the first
// item's sequence number: the one put took in the run of the write
// function that committed (or, inside an Update, in the last run so far).
func (q *Queue[T]) enqueue(w tipkv.Writer, at time.Time, hs, group []byte, items []T) (int64, error) {
	if len(items) == 0 {
		return 0, nil
	}
	if err := checkAt(at); err != nil {
		return 0, fmt.Errorf("queue %q: %w", q.c.name, err)
	}
	eb := encodeBufs.Get().(*encodeBuf)
	defer eb.put()
	var first int64
	// f is called directly by the write functions (never through a
	// variable), so that it stays on this stack.
	f := func(tx *link.Tx) error {
		if err := q.c.owns(tx); err != nil {
			return err
		}
		if err := q.encode(tx, eb, at, hs, group, items); err != nil {
			return err
		}
		var err error
		first, err = q.put(tx, eb)
		return err
	}
	var err error
	if q.c.sm != nil {
		err = q.c.write(w, f)
	} else {
		err = link.Write(w, f)
	}
	if err != nil {
		return 0, fmt.Errorf("queue %q: enqueue: %w", q.c.name, err)
	}
	return first, nil
}

// checkAt checks a visible-at time given to an enqueue.
func checkAt(at time.Time) error {
	if at.IsZero() {
		return nil
	}
	if err := checkTime(at); err != nil {
		return fmt.Errorf("enqueue at: %w", err)
	}
	return nil
}

// encode encodes items into eb, each with its item header: enqueued at
// the Tx's commit time (one clock reading per Update, the one its
// document versions carry) with the Tx's metadata and the group, if
// any. It runs inside the
// write function, before anything goes into the batch: a value that fails
// or is too large leaves nothing in the batch, and no sequence number
// taken.
func (q *Queue[T]) encode(tx *link.Tx, eb *encodeBuf, at time.Time, hs, group []byte, items []T) error {
	now := tx.Now()
	if err := checkTime(time.Unix(0, now)); err != nil {
		return fmt.Errorf("the clock reads %w", err)
	}
	h := header{enqueued: now, at: unixNano(at), headers: hs, meta: tx.Meta(), group: group}
	buf, ends := eb.buf[:0], eb.ends[:0]
	eb.payloads = eb.payloads[:0]
	for i, v := range items {
		if i == 1 {
			// Size the buffer once, from the first item, rather than
			// growing it by doubling (copying and zeroing each time).
			buf = slices.Grow(buf, (len(buf)+len(buf)/4)*(len(items)-1))
		}
		buf = appendHeader(buf, itemFormat, h)
		payload := len(buf)
		var err error
		if buf, err = q.codec.Append(buf, v); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		if n := len(buf) - payload; n > q.maxValue {
			return fmt.Errorf("%w: item %d: value is %d bytes, over the %d-byte limit", tipkv.ErrInvalid, i, n, q.maxValue)
		}
		ends = append(ends, len(buf))
		eb.payloads = append(eb.payloads, payload)
	}
	eb.buf, eb.ends = buf, ends
	return nil
}

// put writes the items encoded in eb to tx, at new sequence numbers, and
// returns the first.
func (q *Queue[T]) put(tx *link.Tx, eb *encodeBuf) (int64, error) {
	if err := q.c.owns(tx); err != nil {
		return 0, err
	}
	n := len(eb.ends)
	var first int64
	if q.c.sm != nil {
		start, err := q.c.allocShared(tx, n)
		if err != nil {
			return 0, err
		}
		tx.OnCommit(func() {
			q.c.m.enqueued.Add(uint64(n))
			q.c.notifyLocal()
		})
		first = start
	} else {
		b, err := q.c.alloc(n)
		if err != nil {
			return 0, err
		}
		tx.OnCommit(b.commitFn)
		tx.OnAbort(b.abortFn)
		if knobs.Queue.EnqueueWritesState {
			q.c.writeState(tx, nil)
		}
		first = b.start
	}
	// The batch copies what it is given, so one buffer serves every key.
	start := 0
	for i, end := range eb.ends {
		eb.key = q.c.k.item(eb.key[:0], first+int64(i))
		if err := tx.Batch.Set(eb.key, eb.buf[start:end]); err != nil {
			return 0, err
		}
		start = end
	}
	return first, nil
}

// encodeBuf holds encoded items until the batch has copied them; pooled,
// so that steady enqueueing does not allocate a buffer per call.
type encodeBuf struct {
	buf      []byte
	ends     []int
	payloads []int // where each item's payload starts in buf
	key      []byte
}

var encodeBufs = sync.Pool{New: func() any { return new(encodeBuf) }}

func (eb *encodeBuf) put() {
	if cap(eb.buf) <= 4<<20 {
		encodeBufs.Put(eb)
	}
}

// owns checks that tx writes to this queue's DB.
func (c *core) owns(tx *link.Tx) error {
	if tx.DB != c.ln {
		return fmt.Errorf("%w: queue %q: the batch belongs to another DB", tipkv.ErrInvalid, c.name)
	}
	return nil
}

// Len returns the number of messages in the queue: visible, leased and
// delayed ones, everything enqueued and committed that is not yet
// acknowledged, popped or dead-lettered.
//
// On Pebble it reads only memory. On a shared engine it reads the store,
// as Stats does, and returns 0 if the read fails (ReadStats returns the
// error).
func (q *Queue[T]) Len() int { return q.Stats().Len }

// Stats describes a queue at one moment.
type Stats struct {
	// Head is the oldest sequence number not yet consumed (Tail when the
	// queue is empty). Every message below it is gone.
	Head int64
	// Tail is the sequence number the next enqueue gets.
	Tail int64
	// Len is the number of messages in the queue, as Len returns it.
	Len int
	// Leased is the number of messages leased to consumers now (on a
	// shared engine: to any process, until ClockSkew after the lease
	// ends).
	Leased int
	// Delayed is the number of messages known to be invisible until a
	// later time (released with a delay, or enqueued with EnqueueAt and
	// reached by a read; on a shared engine every such message).
	Delayed int
	// DeadLetters is the number of the queue's dead letters (not counted
	// in Len; see DeadLetters).
	DeadLetters int
	// Paused says the queue delivers nothing until it is resumed (see
	// Pause).
	Paused bool
	// MaxInFlight is the cap on messages leased at once, 0 for none (see
	// SetMaxInFlight).
	MaxInFlight int
}

// Stats returns the queue's counters.
//
// On Pebble it reads only memory. On a shared engine (etcd, SQL) it reads
// the store: the queue-state key, every live message from the head to the
// tail, the keys of the dead letters and the control key (range reads, of about
// n/page-size round trips for n messages), so it costs in proportion to
// the queue's length; if the read fails it returns the zero Stats
// (ReadStats returns the error).
func (q *Queue[T]) Stats() Stats {
	st, _ := q.ReadStats()
	return st
}

// ReadStats is Stats with the error of its read: on a shared engine, an
// error of the store; on Pebble, tipkv.ErrClosed once the DB closed (with
// the counters as they were).
func (q *Queue[T]) ReadStats() (Stats, error) {
	c := q.c
	if c.sm != nil {
		st, err := c.statsShared()
		if err != nil {
			return Stats{}, fmt.Errorf("queue %q: stats: %w", c.name, err)
		}
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Head: c.head(), Tail: c.next, Len: c.depth(), Leased: c.nleased, Delayed: c.nwaiting, DeadLetters: int(c.m.dead.Load()),
		Paused: c.ctl.paused, MaxInFlight: c.ctl.max}
	if c.closed {
		return st, fmt.Errorf("queue %q: stats: %w", c.name, tipkv.ErrClosed)
	}
	return st, nil
}
