package queue_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
)

// logged is a slog handler that keeps tipkv's queue records.
type logged struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	var ev string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "event" {
			ev = a.Value.String()
		}
		return true
	})
	switch ev {
	case "dead-letter", "lease-expired", "redelivery", "corrupt":
		l.mu.Lock()
		l.recs = append(l.recs, r.Clone())
		l.mu.Unlock()
	}
	return nil
}

// events returns "level event seq" for each record kept.
func (l *logged) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		s := r.Level.String()
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "event", "seq", "reason":
				s += " " + a.Value.String()
			}
			return true
		})
		out = append(out, s)
	}
	return out
}

func queueMetrics(t *testing.T, db *tipkv.DB, name string) tipkv.QueueMetrics {
	t.Helper()
	m, err := db.Metrics()
	require.NoError(t, err)
	i := slices.IndexFunc(m.Queues, func(q tipkv.QueueMetrics) bool { return q.Name == name })
	require.GreaterOrEqual(t, i, 0, "queue %q in %+v", name, m.Queues)
	return m.Queues[i]
}

// The queue logs through the DB's logger: a lease that expired (Info), a
// redelivery (Debug), a message dead-lettered (Warn) and a value that does
// not decode (Error), each naming the queue and the message. DB.Metrics
// has the queue's gauges (on Pebble) and counters.
func TestLogsAndMetrics(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		clock := newClock()
		var l logged
		dbs := m.open(t, 1, &tipkv.Options{Clock: clock.Now, Logger: slog.New(&l)})
		db := dbs[0]
		q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 2})
		require.Equal(t, tipkv.QueueMetrics{Name: "q", Gauges: m.name == "pebble"}, queueMetrics(t, db, "q"), "registered at Open")

		push(t, db, q, 1, 2, 3)
		_, err := q.EnqueueAt(db, clock.Now().Add(time.Hour), 4)
		require.NoError(t, err)
		ms, err := q.Receive(2, time.Minute) // 1 and 2
		require.NoError(t, err)
		require.Len(t, ms, 2)
		require.NoError(t, q.Ack(db, ms[0].ID))
		if m.name == "pebble" {
			got := queueMetrics(t, db, "q")
			// (4 is not counted as delayed: no read has reached it.)
			require.Equal(t, tipkv.QueueMetrics{Name: "q", Depth: 3, Leased: 1, Enqueued: 4, Deliveries: 2, Acks: 1, Gauges: true}, got)
		}

		// 2's lease expires: it comes back (a redelivery), then is released
		// and, delivered twice, dead-lettered.
		clock.Advance(2*time.Minute + time.Hour/2)
		ms, err = q.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, []int{2}, values(ms))
		require.NoError(t, q.Release(ms[0].ID, 0))
		ms, err = q.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, []int{3}, values(ms), "2 is dead")
		require.NoError(t, q.Ack(db, ms[0].ID))

		// A value that does not decode as an int.
		s := openQ(t, db, "q", &queue.Options[string]{Codec: codec.String{}})
		push(t, db, s, "\xc1")
		clock.Advance(time.Hour)
		ms, err = q.Receive(10, time.Minute)
		require.ErrorIs(t, err, tipkv.ErrCorrupt)
		require.Equal(t, []int{4}, values(ms))
		require.NoError(t, q.Ack(db, ms[0].ID))

		// (On a shared engine a lapsed lease is seen when the message is
		// taken again, so the order is the same.)
		want := []string{"INFO lease-expired 2", "DEBUG redelivery 2", "WARN dead-letter 2 max-attempts", "ERROR corrupt 5", "WARN dead-letter 5 corrupt"}
		require.Equal(t, want, l.events())

		got := queueMetrics(t, db, "q")
		wantM := tipkv.QueueMetrics{Name: "q", Enqueued: 5, Deliveries: 5, Redeliveries: 1, Acks: 3, DeadLettered: 2}
		if m.name == "pebble" {
			wantM.DeadLetters, wantM.Gauges = 2, true
		}
		require.Equal(t, wantM, got)
		require.Equal(t, 0, q.Len())
		require.Equal(t, 2, q.Stats().DeadLetters, "on every engine")

		require.NoError(t, q.Discard(db, 2))
		if m.name == "pebble" {
			require.Equal(t, int64(1), queueMetrics(t, db, "q").DeadLetters)
		}
		require.Equal(t, 1, q.Stats().DeadLetters)
	})
}

// Without a logger nothing is logged and nothing fails; the metrics of a
// queue reopened count its messages and dead letters from the store.
func TestMetricsAfterReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 1})
	push(t, db, q, 1, 2, 3)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, q.Release(ms[0].ID, 0))
	ms, err = q.Receive(1, time.Minute) // 1 is dead
	require.NoError(t, err)
	require.Equal(t, []int{2}, values(ms))
	require.NoError(t, db.Close())

	db, err = tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 1})
	require.Equal(t, tipkv.QueueMetrics{Name: "q", Depth: 2, DeadLetters: 1, Gauges: true}, queueMetrics(t, db, "q"))
}
