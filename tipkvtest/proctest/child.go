package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// The names the workload writes under.
const (
	jobsQueue  = "jobs"
	doneQueue  = "done-" // + the consumer's role
	collection = "docs"
	feedStream = "changes"
	groupFeed  = "acked-" // + the group: the group's messages in the order they were acknowledged
)

// groupOf is the group of message k of a batch, under Config.Groups.
func groupOf(k, groups int) string { return fmt.Sprintf("g%d", k%groups) }

// docIDs are the documents every producer writes.
var docIDs = []string{"d0", "d1", "d2"}

type (
	// message is a queue message: batch token/k.
	message struct {
		ID string `msgpack:"id"`
	}
	// consumed is a consumer's record of a message it acknowledged.
	consumed struct {
		ID string `msgpack:"id"`
		By string `msgpack:"by"` // role.incarnation
	}
	// doc is a document version and a feed event: the token of the
	// Update that wrote it.
	doc struct {
		Token string `msgpack:"token"`
	}
)

// linePrefix marks the children's reports among the test binary's other
// output.
const linePrefix = "PROCTEST "

// reporter writes whole lines, one write(2) each: a SIGKILL cuts a line
// whole or not at all.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = io.WriteString(r.w, linePrefix+fmt.Sprintf(format, args...)+"\n")
}

// Child is the body of a child process: the test function that
// Config.Child names calls it and nothing else. In a process that Start
// did not start it skips t. Otherwise it opens a DB with open (again and
// again while open fails, as an engine that is recovering makes it: it
// gives up when the parent stops the child), runs the child's role on it
// until the parent stops it, and closes the DB. role is the child's,
// producer-<i>, consumer-<i> or member-<i>, the same for every incarnation: an
// engine may name its connections after it, to find them for its faults.
func Child(t *testing.T, open func(ctx context.Context, role string) (*tipkv.DB, error)) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("a child of a multi-process test: proctest.Start runs it")
	}
	var sp spec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		t.Fatalf("proctest: the child's spec %q: %v", raw, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // commands from the parent; it closes stdin: finish
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "freeze":
				freezeNext.Store(true)
			case "thaw":
				select {
				case thawed <- struct{}{}:
				default:
				}
			}
		}
		cancel()
	}()
	var db *tipkv.DB
	for {
		var err error
		if db, err = open(ctx, sp.Role); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // a retry's pause
	}
	defer db.Close()
	w, err := newWorkload(db, sp)
	if err != nil {
		t.Fatal(err)
	}
	w.out.printf("UP %s", w.self)
	switch {
	case strings.HasPrefix(sp.Role, "producer"):
		w.produce(ctx)
	case strings.HasPrefix(sp.Role, "member"):
		w.member(ctx)
	default:
		w.consume(ctx)
	}
	w.out.printf("DONE %s", w.self)
}

// workload is one child's role on its DB.
type workload struct {
	sp   spec
	self string // role.incarnation
	db   *tipkv.DB
	q    *queue.Queue[message]
	docs *versioned.Collection[doc]
	feed *versioned.Feed[doc]
	out  *reporter
}

func newWorkload(db *tipkv.DB, sp spec) (*workload, error) {
	w := &workload{sp: sp, self: fmt.Sprintf("%s.%d", sp.Role, sp.Incarnation), db: db, out: &reporter{w: os.Stdout}}
	var err error
	if w.q, err = queue.Open[message](db, jobsQueue, &queue.Options[message]{MaxAttempts: -1}); err != nil {
		return nil, err
	}
	if w.docs, err = versioned.NewCollection[doc](db, collection, nil); err != nil {
		return nil, err
	}
	if w.feed, err = versioned.NewFeed[doc](db, nil); err != nil {
		return nil, err
	}
	return w, nil
}

// pause paces a loop after a failed call (the engine may be without a
// leader or recovering for a moment), or while the queue is full.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

// outcome names a write's result in a report: OK, UNK (unknown outcome)
// or ERR (known not to have been applied).
func outcome(op string, err error) string {
	switch {
	case err == nil:
		return op + "-OK"
	case errors.Is(err, tipkv.ErrUnknownOutcome):
		return op + "-UNK"
	}
	return op + "-ERR"
}

// produce writes batches until ctx ends: in one Update, a version of one
// of the shared documents, a feed event and PerBatch messages, all
// carrying the batch's token.
func (w *workload) produce(ctx context.Context) {
	for i := 0; ctx.Err() == nil; {
		if w.sp.Backlog > 0 && w.q.Len() >= w.sp.Backlog {
			pause(ctx)
			continue
		}
		token := fmt.Sprintf("%s:%d", w.self, i)
		id := docIDs[i%len(docIDs)]
		i++
		w.out.printf("PUTTING %s %s %s", token, id, w.self)
		var v, pos int64
		err := w.db.Update(func(b *tipkv.Batch) error {
			var err error
			if v, err = w.docs.Put(b, id, doc{Token: token}); err != nil {
				return err
			}
			if pos, err = w.feed.Append(b, feedStream, doc{Token: token}); err != nil {
				return err
			}
			msgs := make([]message, w.sp.PerBatch)
			for k := range msgs {
				msgs[k] = message{ID: fmt.Sprintf("%s/%d", token, k)}
			}
			if w.sp.Groups <= 0 {
				_, err = w.q.Enqueue(b, msgs...)
				return err
			}
			for k, m := range msgs {
				if _, err := w.q.EnqueueWith(b, queue.EnqueueOptions{Group: groupOf(k, w.sp.Groups)}, m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			v, pos = 0, 0
		}
		w.out.printf("%s %s %s %d %d %s", outcome("PUT", err), token, id, v, pos, w.self)
		if err != nil {
			pause(ctx)
		}
	}
}

// consume receives messages until ctx ends and, in one Update per
// delivery, acknowledges them and records them in its done queue, and
// each message of a group in its group's feed stream.
func (w *workload) consume(ctx context.Context) {
	done, err := queue.Open[consumed](w.db, doneQueue+w.sp.Role, nil)
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		before := time.Now()
		ms, err := w.q.ReceiveWait(ctx, w.sp.ReceiveMax, w.sp.Lease)
		after := time.Now()
		if err != nil || len(ms) == 0 {
			pause(ctx)
			continue
		}
		ids := make([]queue.ID, len(ms))
		recs := make([]consumed, len(ms))
		for i, m := range ms {
			ids[i], recs[i] = m.ID, consumed{ID: m.Value.ID, By: w.self}
			w.out.printf("RECV %s %d %d %d %s %d", m.Value.ID, m.Seq, before.UnixNano(), after.UnixNano(), w.self, m.Attempts)
		}
		ack := func() error {
			return w.db.Update(func(b *tipkv.Batch) error {
				if err := w.q.Ack(b, ids...); err != nil {
					return err
				}
				for _, m := range ms {
					if m.Group == "" {
						continue
					}
					if _, err := w.feed.Append(b, groupFeed+m.Group, doc{Token: m.Value.ID}); err != nil {
						return err
					}
				}
				_, err := done.Enqueue(b, recs...)
				return err
			})
		}
		err = ack()
		// Sending the Update again is safe: if the first landed, its Ack
		// fails with ErrLeaseLost and nothing is written. A known failure
		// wrote nothing: retried while the child runs, left to the lease
		// when it stops.
		for err != nil && !errors.Is(err, queue.ErrLeaseLost) && (ctx.Err() == nil || errors.Is(err, tipkv.ErrUnknownOutcome)) {
			if errors.Is(err, tipkv.ErrUnknownOutcome) {
				w.out.printf("ACK-UNK %d %s", len(ms), w.self)
			}
			time.Sleep(20 * time.Millisecond) // a retry's pause
			err = ack()
		}
		switch {
		case err == nil:
			w.out.printf("ACK-OK %d %s", len(ms), w.self)
		case errors.Is(err, queue.ErrLeaseLost):
			w.out.printf("ACK-LOST %d %s", len(ms), w.self)
		default:
			w.out.printf("ACK-ERR %d %s", len(ms), w.self)
		}
	}
}
