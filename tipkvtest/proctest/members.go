package proctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// The members' workload (Config.Members): every member-<i> child joins
// the group projGroup of the producers' feed under its role's name, and
// the one that holds the group projects the feed: per event, in one
// Update, it appends the event's position to the stream projStream and
// advances the group's cursor (versioned.Member.Advance). The others
// stand by, and take over when the active member is killed (after its
// lease and the engine's ClockSkew) or, being its restart under the same
// name, at once.
//
// A member reports PROJECTING before each Update and PROJ-OK, PROJ-UNK or
// PROJ-ERR after it, with the event's position and its epoch. Check then
// requires the projection to hold every event of the feed up to the
// group's cursor exactly once, in order, and nothing past it, and every
// PROJ-OK to be in it.
// freezeNext makes a member child's next projecting Update wait inside
// itself for thawed (Rig.FreezeInUpdate), the parent having stopped the
// process meanwhile.
var (
	freezeNext atomic.Bool
	thawed     = make(chan struct{}, 1)
)

const (
	projGroup  = "projector"
	projStream = "projection"
)

// Members returns the member children's roles: member-0, ....
func (r *Rig) Members() []string { return append([]string(nil), r.members...) }

// WaitProjected waits until the members have reported n more events
// projected than now, and returns the role of the member that projected
// the last of them: the active member. It fails the test after 2 minutes
// without.
func (r *Rig) WaitProjected(t testing.TB, n int, what string) string {
	t.Helper()
	r.log.mu.Lock()
	want := r.log.nproj + n
	r.log.mu.Unlock()
	r.log.wait(t, what, func() bool { return r.log.nproj >= want })
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	return r.log.projBy
}

// FreezeInUpdate stops the member child of role (SIGSTOP) in its next
// projecting Update, between the Advance that checked its lease and the
// commit: the child reports FROZEN there and waits for Thaw's word, and
// the parent stops it once it reported (a process stopping itself with a
// signal to itself may run on a little first: seen committing before it
// stopped). A process paused at the worst moment, which will send its
// commit believing it holds the group. It fails the test after 2 minutes
// without. Thaw sends it on.
func (r *Rig) FreezeInUpdate(t testing.TB, role string) {
	t.Helper()
	r.mu.Lock()
	c := r.children[role]
	self := fmt.Sprintf("%s.%d", role, r.lives[role])
	r.mu.Unlock()
	if c == nil {
		t.Fatalf("proctest: freeze of %s, which does not run", role)
	}
	if _, err := io.WriteString(c.stdin, "freeze\n"); err != nil {
		t.Fatal(err)
	}
	r.log.wait(t, "until "+self+" froze in its Update", func() bool { return r.log.last[self] == "FROZEN" })
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGSTOP child %s in its Update", self)
}

// member projects the feed while it holds the group, until ctx ends.
func (w *workload) member(ctx context.Context) {
	m, err := w.feed.Join(feedStream, projGroup, w.sp.Role, &versioned.MemberOptions{Lease: w.sp.Lease})
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		for e, err := range m.Follow(ctx) {
			if err != nil {
				break // a failed read or write (the engine's trouble): follow again
			}
			w.project(ctx, m, e)
		}
		pause(ctx)
	}
}

// project projects e, sending the Update again after an unknown outcome:
// if the first landed, the cursor is at e already and Advance refuses to
// move it there again (ErrConflict), writing nothing.
func (w *workload) project(ctx context.Context, m *versioned.Member[doc], e versioned.Event[doc]) {
	if freezeNext.CompareAndSwap(true, false) {
		w.late(m, e)
		return
	}
	for {
		w.out.printf("PROJECTING %d %s", e.Position, w.self)
		err := w.db.Update(func(b *tipkv.Batch) error {
			if _, err := w.feed.Append(b, projStream, doc{Token: strconv.FormatInt(e.Position, 10)}); err != nil {
				return err
			}
			return m.Advance(b, e.Position)
		})
		w.out.printf("%s %d %d %s", outcome("PROJ", err), e.Position, m.Epoch(), w.self)
		if !errors.Is(err, tipkv.ErrUnknownOutcome) || ctx.Err() != nil {
			return
		}
		pause(ctx)
	}
}

// late is Rig.FreezeInUpdate's Update: it advances the group's cursor
// past e without projecting it, and waits between the Advance that
// checked the lease and the commit (the parent stops the process there)
// until the parent sends it on. Nothing else in it could conflict with the member that
// takes the group over meanwhile, so only the group's fencing can refuse
// it; it reports LATE-OK if it committed, which Check fails: the cursor
// would then have moved over an event nobody projected.
func (w *workload) late(m *versioned.Member[doc], e versioned.Event[doc]) {
	err := w.db.Update(func(b *tipkv.Batch) error {
		if err := m.Advance(b, e.Position); err != nil {
			return err
		}
		w.out.printf("FROZEN %d %d %s", e.Position, m.Epoch(), w.self)
		<-thawed
		return nil
	})
	w.out.printf("%s %d %d %s", outcome("LATE", err), e.Position, m.Epoch(), w.self)
}

// checkMembers reads the projection and the group's cursor through feed
// and checks them against the feed's events and the members' reports.
func checkMembers(t testing.TB, lines []string, feed *versioned.Feed[doc], events map[int64]string, retry func(string, func() error)) {
	t.Helper()
	var projected []int64
	var cursor int64
	retry("read the projection", func() error {
		projected = projected[:0]
		for e, err := range feed.Since(projStream, 0, tipkv.Query{}) {
			if err != nil {
				return err
			}
			p, err := strconv.ParseInt(e.Value.Token, 10, 64)
			if err != nil {
				return err
			}
			projected = append(projected, p)
		}
		var err error
		cursor, err = feed.Cursor(feedStream, projGroup)
		return err
	})
	var want []int64
	for p := range events {
		if p <= cursor {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	if len(projected) == 0 {
		t.Errorf("the members projected nothing")
	}
	if !slices.Equal(projected, want) {
		t.Errorf("the projection holds %d events, not the %d up to the cursor %d, each once in order (first difference at %d)", len(projected), len(want), cursor, firstDiff(projected, want))
	}
	in := map[int64]bool{}
	for _, p := range projected {
		in[p] = true
	}
	epochs := map[string]bool{}
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "LATE-OK" {
			t.Errorf("a member stopped in its Update committed after it lost the group: %s", line)
		}
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "PROJ-OK" {
			continue
		}
		p, _ := strconv.ParseInt(f[1], 10, 64)
		if !in[p] {
			t.Errorf("%s: acknowledged, not in the projection", line)
		}
		epochs[f[2]] = true
	}
	t.Logf("members: %d events projected up to the cursor, in %d epochs", len(projected), len(epochs))
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
