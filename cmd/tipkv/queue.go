package main

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
)

var queueCommand = &command{
	name:    "queue",
	args:    []string{"DIR", "NAME"},
	summary: "show a queue's state and next messages; list, requeue or discard dead letters",
	help: `
Shows queue NAME: its head (the oldest sequence number not yet consumed),
its tail (the sequence number the next enqueue gets; stats shows the
same), its depth (messages in the queue), how many of them are delayed,
and its dead letters; then the
next -n messages a Receive would deliver (a peek: nothing changes), their
values decoded from msgpack or JSON (hex when a value is neither).

--dead lists the dead letters instead: messages delivered MaxAttempts times
without an Ack, or whose stored bytes were corrupt.

--requeue SEQS moves dead letters back to the tail of the queue with new
sequence numbers and their attempts reset; --discard SEQS deletes them.
SEQS is a comma-separated list of sequence numbers, or "all". These two
open the store for writing: stop the process that uses the store first.

Leases live in the memory of the process that holds the store, so a store
tipkv can open has none: every unacknowledged message is either visible or
delayed (enqueued with EnqueueAt, or released with a delay).
Exits 1 when the store has no queue NAME.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		n := fs.Int("n", 10, "show at most `N` messages or dead letters; 0 shows all")
		dead := fs.Bool("dead", false, "list the dead letters instead of the next messages")
		requeue := fs.String("requeue", "", "move the dead letters `SEQS` (or all) back to the queue")
		discard := fs.String("discard", "", "delete the dead letters `SEQS` (or all)")
		return func(c *ctx, args []string) int {
			if *n < 0 {
				return c.usagef("-n must be >= 0, not %d", *n)
			}
			if *requeue != "" && *discard != "" {
				return c.usagef("--requeue and --discard do not go together")
			}
			op := queueOp{limit: *n, dead: *dead}
			for _, a := range []struct{ name, arg string }{{"requeue", *requeue}, {"discard", *discard}} {
				if a.arg == "" {
					continue
				}
				op.action = a.name
				all, seqs, err := parseSeqs(a.arg)
				if err != nil {
					return c.usagef("--%s: %v", a.name, err)
				}
				op.all, op.seqs = all, seqs
			}
			return queueCmd(c, args[0], args[1], op)
		}
	},
}

// What a queue's head and tail are, in the words stats and queue both
// print: one definition, from the queue package's Stats.
const (
	headLegend  = "the oldest sequence number not yet consumed"
	tailLegend  = "the sequence number the next enqueue gets"
	queueLegend = "head: " + headLegend + "; tail: " + tailLegend + "."
)

type queueOp struct {
	limit  int
	dead   bool
	action string // "", "requeue" or "discard"
	all    bool
	seqs   []int64
}

var pastTense = map[string]string{"requeue": "requeued", "discard": "discarded"}

func parseSeqs(s string) (all bool, seqs []int64, err error) {
	if s == "all" {
		return true, nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || n < 1 {
			return false, nil, fmt.Errorf("%q is not a sequence number; want numbers >= 1 separated by commas, or all", part)
		}
		seqs = append(seqs, n)
	}
	return false, seqs, nil
}

// exists reports whether the store holds any key of queue name.
func (s *store) queueExists(name string) (bool, error) {
	for _, f := range []codec.Family{codec.FamilyQueueItems, codec.FamilyQueueState, codec.FamilyDeadLetters} {
		prefix := segPrefix(f, name)
		found := false
		if err := s.scan(prefix, codec.PrefixEnd(prefix), func(_, _ []byte) error { found = true; return errStop }); err != nil {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

func queueCmd(c *ctx, dir, name string, op queueOp) int {
	s, code := c.openStore(dir, op.action != "")
	if s == nil {
		return code
	}
	defer s.close()

	if ok, err := s.queueExists(name); err != nil {
		return c.failf(exitFail, "%v", err)
	} else if !ok {
		return c.notFoundf("the store has no queue %q", name)
	}
	// Raw bytes, not T: the payload is decoded generically below. No
	// attempt limit: a peek never moves anything anyway.
	q, err := queue.Open(s.db, name, &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	var done []int64
	if op.action != "" {
		if done, err = queueAct(q, s, op); err != nil {
			return c.failf(exitFail, "%v", err)
		}
	}

	// Dead letters: all are counted, limit are kept.
	var deads []queue.DeadLetter[[]byte]
	var deadCount int
	var deadErr error
	for d, err := range q.DeadLetters() {
		if err != nil {
			deadErr = err
			break
		}
		deadCount++
		if op.dead && (op.limit == 0 || len(deads) < op.limit) {
			deads = append(deads, d)
		}
	}
	st := q.Stats()
	delayed, err := s.countDelayed(name, st.Head, time.Now())
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	var msgs []queue.Message[[]byte]
	if !op.dead && st.Len > 0 {
		max := op.limit
		if max == 0 {
			max = st.Len
		}
		if msgs, err = q.Peek(max); err != nil {
			return c.failf(exitFail, "%v (tipkv dump --family queue-items --prefix NAME shows the stored bytes)", err)
		}
	}

	if c.json {
		obj := object{{"queue", name}, {"head", st.Head}, {"tail", st.Tail}, {"depth", st.Len}, {"delayed", delayed}, {"dead", deadCount}}
		if op.action != "" {
			obj = append(obj, field{pastTense[op.action], done})
		}
		if op.dead {
			list := []any{}
			for _, d := range deads {
				list = append(list, append(object{{"seq", d.Seq}, {"attempts", d.Attempts}, {"enqueued", jsonTime(d.Enqueued)}, {"died", jsonTime(d.Died)}}, decode(d.Value).fields()...))
			}
			obj = append(obj, field{"dead_letters", list})
		} else {
			list := []any{}
			for _, m := range msgs {
				list = append(list, append(object{{"seq", m.Seq}, {"attempts", m.Attempts}, {"enqueued", jsonTime(m.Enqueued)}}, decode(m.Value).fields()...))
			}
			obj = append(obj, field{"messages", list})
		}
		if deadErr != nil {
			obj = append(obj, field{"error", deadErr.Error()})
		}
		err = writeJSON(c.stdout, obj)
	} else {
		if op.action != "" {
			fmt.Fprintf(c.stdout, "%s %d dead letter(s): %s\n\n", pastTense[op.action], len(done), joinInts(done))
		}
		t := newTable(c.stdout)
		t.row("queue", quoteIfNeeded(name))
		t.row("head", st.Head, headLegend)
		t.row("tail", st.Tail, tailLegend)
		t.row("depth", st.Len, fmt.Sprintf("messages in the queue, %d of them delayed", delayed))
		t.row("dead", deadCount, "dead letters")
		_ = t.flush()
		fmt.Fprintln(c.stdout)
		if op.dead {
			t = newTable(c.stdout, "SEQ", "ATTEMPTS", "ENQUEUED", "DIED", "VALUE")
			for _, d := range deads {
				t.row(d.Seq, d.Attempts, textTime(d.Enqueued), textTime(d.Died), decode(d.Value).cell())
			}
		} else {
			t = newTable(c.stdout, "SEQ", "ATTEMPTS", "ENQUEUED", "VALUE")
			for _, m := range msgs {
				t.row(m.Seq, m.Attempts, textTime(m.Enqueued), decode(m.Value).cell())
			}
		}
		err = t.flush()
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	if deadErr != nil {
		return c.failf(exitFail, "%v", deadErr)
	}
	return exitOK
}

// queueAct requeues or discards the dead letters op names and returns
// their sequence numbers.
func queueAct(q *queue.Queue[[]byte], s *store, op queueOp) ([]int64, error) {
	seqs := op.seqs
	if op.all {
		for d, err := range q.DeadLetters() {
			if err != nil && d.Seq == 0 {
				return nil, err
			}
			seqs = append(seqs, d.Seq)
			if err != nil {
				break // a corrupt dead letter can still be moved or discarded
			}
		}
		if len(seqs) == 0 {
			return []int64{}, nil
		}
	}
	if op.action == "requeue" {
		return seqs, q.Requeue(s.db, seqs...)
	}
	return seqs, q.Discard(s.db, seqs...)
}

// countDelayed counts the messages of queue name from head on that stay
// invisible until after now. Stats counts only the delayed messages a read
// has reached, so this reads the item headers.
func (s *store) countDelayed(name string, head int64, now time.Time) (int, error) {
	prefix := segPrefix(codec.FamilyQueueItems, name)
	n := 0
	err := s.scan(codec.AppendAsc(bytes.Clone(prefix), head), codec.PrefixEnd(prefix), func(_, v []byte) error {
		if h, _, err := parseQueueValue(v, queueItemTag); err == nil && h.at > now.UnixNano() {
			n++
		}
		return nil
	})
	return n, err
}

func joinInts(ns []int64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, ", ")
}

// jsonTime renders t in UTC, RFC 3339, or nil for the zero time.
func jsonTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// textTime renders t for a table, "-" for the zero time.
func textTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
