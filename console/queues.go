package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// queueSummary reads a queue's figures; an error is kept in the summary,
// so that one bad queue does not hide the others.
func (c *Console) queueSummary(name string) QueueSummary {
	s := QueueSummary{Name: name, NameHex: hexIfInvalid(name)}
	q, err := c.queueHandle(name)
	if err == nil {
		err = c.fillSummary(q, &s)
	}
	if err != nil {
		s.Error = err.Error()
	}
	return s
}

func (c *Console) fillSummary(q *queue.Queue[[]byte], s *QueueSummary) error {
	st, err := q.ReadStats()
	if err != nil {
		return err
	}
	s.Head, s.Tail, s.Depth, s.Leased, s.Delayed = st.Head, st.Tail, st.Len, st.Leased, st.Delayed
	// Dead letters are counted by reading them: the queue's metrics count
	// them on Pebble only.
	for _, err := range q.DeadLetters() {
		if s.DeadLetters == countCap {
			s.DeadLettersMore = true
			break
		}
		s.DeadLetters++
		if err != nil {
			break // a dead letter that does not read still counts
		}
	}
	return nil
}

func (c *Console) viewQueues(r *http.Request, p params) (any, error) {
	qs, err := c.queueSummaries()
	if err != nil {
		return nil, err
	}
	return Queues{Queues: qs}, nil
}

func (c *Console) viewQueue(r *http.Request, p params) (any, error) {
	if err := needName(p); err != nil {
		return nil, err
	}
	q, err := c.queueHandle(p.Name)
	if err != nil {
		return nil, err
	}
	out := QueuePage{QueueSummary: QueueSummary{Name: p.Name, NameHex: hexIfInvalid(p.Name)}, Messages: []Message{}, OldestDeadLetters: []DeadLetter{}, Actions: c.opts.Authorize != nil}
	if err := c.fillSummary(q, &out.QueueSummary); err != nil {
		return nil, err
	}
	var after int64
	if p.After != "" {
		if after, err = number(p.After, 0, 1<<63-1); err != nil {
			return nil, fmt.Errorf("%w: parameter %q: %v", tipkv.ErrInvalid, pAfter, err)
		}
	}
	limit := limitOr(p, defaultQueue)
	ms, err := q.Inspect(after, limit+1)
	if err != nil {
		return nil, err
	}
	rend := c.renderer(KindQueue, p.Name)
	for i, m := range ms {
		if i == limit {
			out.Next = strconv.FormatInt(ms[i-1].Seq, 10)
			break
		}
		out.Messages = append(out.Messages, c.message(rend, m))
	}
	for d, err := range q.DeadLetters() {
		if len(out.OldestDeadLetters) == deadShown {
			break
		}
		out.OldestDeadLetters = append(out.OldestDeadLetters, c.deadLetter(rend, d, err))
		if err != nil {
			break
		}
	}
	return out, nil
}

func (c *Console) message(rend Renderer, m queue.MessageInfo[[]byte]) Message {
	out := Message{Seq: m.Seq, State: m.State.String(), Attempts: m.Attempts, Enqueued: m.Enqueued.UTC(), Headers: m.Headers, Group: m.Group, Value: c.value(rend, m.Value)}
	if !m.Until.IsZero() {
		u := m.Until.UTC()
		out.Until = &u
	}
	return out
}

func (c *Console) deadLetter(rend Renderer, d queue.DeadLetter[[]byte], err error) DeadLetter {
	out := DeadLetter{Seq: d.Seq, Attempts: d.Attempts, Enqueued: d.Enqueued.UTC(), Died: d.Died.UTC(), Headers: d.Headers, Group: d.Group}
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Value = c.value(rend, d.Value)
	return out
}

// oneSeq returns the single sequence number a detail page takes.
func oneSeq(p params) (int64, error) {
	if err := needName(p); err != nil {
		return 0, err
	}
	if len(p.Seqs) != 1 {
		return 0, fmt.Errorf("%w: parameter %q: want one sequence number, have %d", tipkv.ErrInvalid, pSeq, len(p.Seqs))
	}
	return p.Seqs[0], nil
}

func (c *Console) viewMessage(r *http.Request, p params) (any, error) {
	seq, err := oneSeq(p)
	if err != nil {
		return nil, err
	}
	q, err := c.queueHandle(p.Name)
	if err != nil {
		return nil, err
	}
	ms, err := q.Inspect(seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 || ms[0].Seq != seq {
		return nil, fmt.Errorf("%w: queue %q has no message %d (consumed, dead-lettered, or not enqueued yet)", tipkv.ErrNotFound, p.Name, seq)
	}
	return c.message(c.renderer(KindQueue, p.Name), ms[0]), nil
}

func (c *Console) viewDeadLetter(r *http.Request, p params) (any, error) {
	seq, err := oneSeq(p)
	if err != nil {
		return nil, err
	}
	q, err := c.queueHandle(p.Name)
	if err != nil {
		return nil, err
	}
	// DeadLetters reads from the oldest: a walk up to seq.
	for d, err := range q.DeadLetters() {
		if d.Seq > seq {
			break
		}
		if d.Seq == seq {
			return c.deadLetter(c.renderer(KindQueue, p.Name), d, err), nil
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: queue %q has no dead letter %d", tipkv.ErrNotFound, p.Name, seq)
}
