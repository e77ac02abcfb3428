package proctest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The check finds each kind of fault it looks for, in reports and stores
// made up for it, and passes the good ones.
func TestCheckFindsFaults(t *testing.T) {
	const lease = 2 * time.Second
	recv := func(id string, seq, before, after int64, by string) string {
		return fmt.Sprintf("RECV %s %d %d %d %s", id, seq, before, after, by)
	}
	l := int64(lease)
	// Two messages per batch. A is acknowledged; B's outcome is unknown
	// (it landed); C's is unknown (it did not); D failed. consumer-0.1 is
	// killed after receiving A/1; consumer-1.1 takes it after the lease.
	good := []string{
		"PUTTING producer-0.1:0 d0 producer-0.1", "PUT-OK producer-0.1:0 d0 1 100 producer-0.1",
		"PUTTING producer-1.1:0 d0 producer-1.1", "PUT-UNK producer-1.1:0 d0 0 0 producer-1.1",
		"PUTTING producer-1.1:1 d1 producer-1.1", "PUT-UNK producer-1.1:1 d1 0 0 producer-1.1",
		"PUTTING producer-0.1:1 d1 producer-0.1", "PUT-ERR producer-0.1:1 d1 0 0 producer-0.1",
		recv("producer-0.1:0/0", 1, 0, 10, "consumer-0.1"),
		recv("producer-0.1:0/1", 2, 0, 10, "consumer-0.1"),
		"ACK-UNK 2 consumer-0.1", "ACK-LOST 2 consumer-0.1", // landed the first time
		recv("producer-1.1:0/0", 3, 20, 30, "consumer-0.1"), // killed before its Ack
		recv("producer-1.1:0/0", 3, l+20, l+30, "consumer-1.1"), "ACK-OK 1 consumer-1.1",
		"DRAIN producer-1.1:0/1 4",
	}
	st := func() store {
		return store{
			docs:   map[string]map[int64]string{"d0": {1: "producer-0.1:0", 2: "producer-1.1:0"}, "d1": {}},
			events: map[int64]string{100: "producer-0.1:0", 101: "producer-1.1:0"},
			consumed: []consumed{
				{ID: "producer-0.1:0/0", By: "consumer-0.1"}, {ID: "producer-0.1:0/1", By: "consumer-0.1"},
				{ID: "producer-1.1:0/0", By: "consumer-1.1"},
			},
		}
	}
	run := func(lines []string, s store) []string {
		rec := &recorder{}
		check(rec, lines, s, 2, lease)
		return rec.errs
	}
	require.Empty(t, run(good, st()))

	with := func(extra ...string) []string { return append(slices.Clone(good), extra...) }
	for _, c := range []struct {
		name  string
		lines []string
		store func(*store)
		want  string
	}{
		{"version reused", good, func(s *store) { s.docs["d0"] = map[int64]string{1: "producer-1.1:0", 2: "producer-0.1:0"} }, "holds producer-1.1:0"},
		{"version lost", good, func(s *store) { s.docs["d0"] = map[int64]string{2: "producer-1.1:0"} }, "version 1 (producer-0.1:0) is lost"},
		{"invented version", good, func(s *store) { s.docs["d1"][1] = "X" }, "nobody wrote"},
		{"version in another document", good, func(s *store) { s.docs["d0"][3] = "producer-1.1:1" }, "written to d1"},
		{"gap", good, func(s *store) { s.docs["d0"][4] = "producer-0.1:0" }, "missing"},
		{"event lost", good, func(s *store) { delete(s.events, 100) }, "position 100 is lost"},
		{"event moved", good, func(s *store) { s.events[100] = "producer-1.1:0" }, "holds producer-1.1:0"},
		{"half an update: no event", good, func(s *store) { delete(s.events, 101) }, "producer-1.1:0 has no event"},
		{"half an update: no version", good, func(s *store) { s.events[102] = "producer-1.1:1" }, "has no document version"},
		{"known failure landed", good, func(s *store) {
			s.docs["d1"][1] = "producer-0.1:1"
			s.events[102] = "producer-0.1:1"
		}, "known outcome"},
		{"half an update: messages without it", with("DRAIN producer-1.1:1/0 5"), nil, "did not land"},
		{"lost message", good, func(s *store) { s.consumed = s.consumed[1:] }, "producer-0.1:0/0 of a batch that landed is lost"},
		{"consumed twice", with("DRAIN producer-0.1:0/0 1"), nil, "2 times"},
		{"recorded twice", good, func(s *store) { s.consumed = append(s.consumed, s.consumed[2]) }, "2 times"},
		{"record without a delivery", good, func(s *store) { s.consumed[2].By = "consumer-0.2" }, "never received it"},
		{"seq reused", with("DRAIN producer-0.1:0/0 4"), nil, "sequence number 4"},
		{"never enqueued", with(recv("Z:1/0", 20, 0, 1, "consumer-0.1")), nil, "never enqueued"},
		{"lease broken", with(recv("producer-1.1:0/0", 3, 25, l-1, "consumer-0.2")), nil, "lease held"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := st()
			s.docs = maps.Clone(s.docs)
			for id, vs := range s.docs {
				s.docs[id] = maps.Clone(vs)
			}
			s.events = maps.Clone(s.events)
			s.consumed = slices.Clone(s.consumed)
			if c.store != nil {
				c.store(&s)
			}
			errs := run(c.lines, s)
			require.NotEmpty(t, errs)
			require.Contains(t, strings.Join(errs, "\n"), c.want)
		})
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
