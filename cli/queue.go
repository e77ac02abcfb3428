package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
)

var queueCommand = &command{
	name:    "queue",
	args:    []string{"DIR", "NAME"},
	summary: "show a queue's state and next messages; list, requeue or discard dead letters; pause, resume or cap it",
	help: `
Shows queue NAME: its head (the oldest sequence number not yet consumed),
its tail (the sequence number the next enqueue gets; stats shows the
same), its depth (messages in the queue), how many of them are delayed,
its dead letters, whether it is paused and its cap on messages in
flight; then the next -n messages a Receive would deliver once it may (a
peek: nothing changes), their values decoded from msgpack or JSON (hex
when a value is neither).

--dead lists the dead letters instead: messages delivered MaxAttempts times
without an Ack, or whose stored bytes were corrupt.

--requeue SEQS moves dead letters back to the tail of the queue with new
sequence numbers and their attempts reset; --discard SEQS deletes them.
SEQS is a comma-separated list of sequence numbers, or "all".

--pause stops the queue's deliveries (Queue.Pause): Receive and Pop
deliver nothing, in every process, until --resume; the pause is stored.
--max-in-flight N caps the messages leased at once at N (0: no cap;
Queue.SetMaxInFlight).

These five open the store for writing: stop the process that uses the
store first (on a shared engine, the others go on and see the change).

Leases live in the memory of the process that holds the store, so a store
tipkv can open has none: every unacknowledged message is either visible or
delayed (enqueued with EnqueueAt, or released with a delay).
Exits 1 when the store has no queue NAME.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		n := fs.Int("n", 10, "show at most `N` messages or dead letters; 0 shows all")
		dead := fs.Bool("dead", false, "list the dead letters instead of the next messages")
		requeue := fs.String("requeue", "", "move the dead letters `SEQS` (or all) back to the queue")
		discard := fs.String("discard", "", "delete the dead letters `SEQS` (or all)")
		pause := fs.Bool("pause", false, "pause the queue: nothing is delivered until --resume")
		resume := fs.Bool("resume", false, "resume the paused queue")
		maxInFlight := fs.Int("max-in-flight", -1, "cap the messages leased at once at `N` (0: no cap)")
		return func(c *ctx, args []string) int {
			if *n < 0 {
				return c.usagef("-n must be >= 0, not %d", *n)
			}
			actions := 0
			for _, on := range []bool{*requeue != "", *discard != "", *pause, *resume, *maxInFlight >= 0} {
				if on {
					actions++
				}
			}
			if actions > 1 {
				return c.usagef("--requeue, --discard, --pause, --resume and --max-in-flight go one at a time")
			}
			if *maxInFlight < -1 || *maxInFlight > queue.MaxInFlightLimit {
				return c.usagef("--max-in-flight must be 0 (no cap) to %d, not %d", queue.MaxInFlightLimit, *maxInFlight)
			}
			op := queueOp{limit: *n, dead: *dead, maxInFlight: *maxInFlight}
			switch {
			case *pause:
				op.action = "pause"
			case *resume:
				op.action = "resume"
			case *maxInFlight >= 0:
				op.action = "max-in-flight"
			}
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
	limit       int
	dead        bool
	action      string // "", "requeue", "discard", "pause", "resume" or "max-in-flight"
	all         bool
	seqs        []int64
	maxInFlight int
}

var pastTense = map[string]string{"requeue": "requeued", "discard": "discarded"}

// onDead reports whether the action moves or deletes dead letters.
func (op queueOp) onDead() bool { return op.action == "requeue" || op.action == "discard" }

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
	q, err := openQueue(s, name)
	if err != nil {
		return c.failed(err)
	}
	var done []int64
	if op.action != "" {
		if done, err = queueAct(q, s, op); err != nil {
			return c.failf(exitFail, "%v", err)
		}
	}
	if !op.onDead() {
		done = nil
	}
	v, err := fetchQueue(s, q, op.limit, op.dead)
	if err != nil {
		return c.failed(err)
	}
	v.action, v.done = op.action, done
	if code := c.show(v); code != exitOK {
		return code
	}
	if v.deadErr != nil {
		return c.failf(exitFail, "%v", v.deadErr)
	}
	return exitOK
}

// openQueue opens queue name of the store with codec.Raw, so that any
// payload comes back, and no attempt limit (a peek never moves anything
// anyway). A name the store holds no key of is a notFoundError.
func openQueue(s *store, name string) (*queue.Queue[[]byte], error) {
	if ok, err := s.queueExists(name); err != nil {
		return nil, err
	} else if !ok {
		return nil, notFoundf("the store has no queue %q", name)
	}
	return queue.Open(s.db, name, &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
}

// queueView is a queue as queue shows it: its counters, then the next
// messages a Receive would deliver, or its dead letters; and what
// --requeue or --discard did first.
type queueView struct {
	name      string
	stats     queue.Stats // Paused and MaxInFlight too
	delayed   int         // messages from the head on that are not visible yet
	deadCount int
	dead      bool // the view lists dead letters, not messages
	deads     []queue.DeadLetter[[]byte]
	msgs      []queue.Message[[]byte]
	action    string  // what queueOp.action did first, if anything
	done      []int64 // the dead letters requeue or discard moved or deleted
	// deadErr is the error that stopped the read of the dead letters:
	// those before it are counted and listed, and the command fails
	// after showing them.
	deadErr error
}

// fetchQueue reads q's counters and, with dead, up to limit of its dead
// letters (all are counted), else the next limit messages a Receive would
// deliver (a Peek: nothing changes). limit 0 reads all.
func fetchQueue(s *store, q *queue.Queue[[]byte], limit int, dead bool) (*queueView, error) {
	v := &queueView{name: q.Name(), dead: dead}
	for d, err := range q.DeadLetters() {
		if err != nil {
			v.deadErr = err
			break
		}
		v.deadCount++
		if dead && (limit == 0 || len(v.deads) < limit) {
			v.deads = append(v.deads, d)
		}
	}
	v.stats = q.Stats()
	var err error
	if v.delayed, err = s.countDelayed(v.name, v.stats.Head, knobs.now()); err != nil {
		return nil, err
	}
	if !dead && v.stats.Len > 0 {
		max := limit
		if max == 0 {
			max = v.stats.Len
		}
		if v.msgs, err = q.Peek(max); err != nil {
			return nil, fmt.Errorf("%w (tipkv dump --family queue-items --prefix NAME shows the stored bytes)", err)
		}
	}
	return v, nil
}

func (v *queueView) json() object {
	st := v.stats
	obj := object{{"queue", v.name}, {"head", st.Head}, {"tail", st.Tail}, {"depth", st.Len}, {"delayed", v.delayed}, {"dead", v.deadCount},
		{"paused", st.Paused}, {"max_in_flight", st.MaxInFlight}}
	if past, ok := pastTense[v.action]; ok {
		obj = append(obj, field{past, v.done})
	}
	if v.dead {
		list := []any{}
		for _, d := range v.deads {
			list = append(list, append(object{{"seq", d.Seq}, {"attempts", d.Attempts}, {"enqueued", jsonTime(d.Enqueued)}, {"died", jsonTime(d.Died)}}, decode(d.Value).fields()...))
		}
		obj = append(obj, field{"dead_letters", list})
	} else {
		list := []any{}
		for _, m := range v.msgs {
			list = append(list, append(object{{"seq", m.Seq}, {"attempts", m.Attempts}, {"enqueued", jsonTime(m.Enqueued)}}, decode(m.Value).fields()...))
		}
		obj = append(obj, field{"messages", list})
	}
	if v.deadErr != nil {
		obj = append(obj, field{"error", v.deadErr.Error()})
	}
	return obj
}

func (v *queueView) table(w io.Writer) error {
	st := v.stats
	switch v.action {
	case "requeue", "discard":
		fmt.Fprintf(w, "%s %d dead letter(s): %s\n\n", pastTense[v.action], len(v.done), joinInts(v.done))
	case "pause":
		fmt.Fprintf(w, "paused: nothing is delivered until --resume\n\n")
	case "resume":
		fmt.Fprintf(w, "resumed\n\n")
	case "max-in-flight":
		fmt.Fprintf(w, "max in flight set to %d\n\n", st.MaxInFlight)
	}
	t := newTable(w)
	t.row("queue", quoteIfNeeded(v.name))
	t.row("head", st.Head, headLegend)
	t.row("tail", st.Tail, tailLegend)
	t.row("depth", st.Len, fmt.Sprintf("messages in the queue, %d of them delayed", v.delayed))
	t.row("dead", v.deadCount, "dead letters")
	if st.Paused {
		t.row("paused", "yes", "nothing is delivered until the queue is resumed")
	} else {
		t.row("paused", "no")
	}
	if st.MaxInFlight > 0 {
		t.row("max in flight", st.MaxInFlight, "messages leased at once, at most")
	} else {
		t.row("max in flight", "-", "no cap")
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if v.dead {
		t = newTable(w, "SEQ", "ATTEMPTS", "ENQUEUED", "DIED", "VALUE")
		for _, d := range v.deads {
			t.row(d.Seq, d.Attempts, textTime(d.Enqueued), textTime(d.Died), decode(d.Value).cell())
		}
	} else {
		t = newTable(w, "SEQ", "ATTEMPTS", "ENQUEUED", "VALUE")
		for _, m := range v.msgs {
			t.row(m.Seq, m.Attempts, textTime(m.Enqueued), decode(m.Value).cell())
		}
	}
	return t.flush()
}

// queueAct does what op asks: requeues or discards the dead letters it
// names (and returns their sequence numbers), or pauses, resumes or caps
// the queue.
func queueAct(q *queue.Queue[[]byte], s *store, op queueOp) ([]int64, error) {
	switch op.action {
	case "pause":
		return nil, q.Pause(s.db)
	case "resume":
		return nil, q.Resume(s.db)
	case "max-in-flight":
		return nil, q.SetMaxInFlight(s.db, op.maxInFlight)
	}
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
