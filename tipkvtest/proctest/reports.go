package proctest

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// reports collects the children's lines (and Check's), in the order the
// parent read them.
type reports struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every line
	lines   []string
	nwrites int               // acknowledged writes
	at      []time.Time       // when each acknowledged write was read
	byRole  map[string]int    // acknowledged writes by role
	nacked  int               // messages acknowledged by consumers
	last    map[string]string // the first word of each reporter's last line
	nproj   int               // events projected by members
	projBy  string            // the role of the member that projected last
}

func newReports() *reports {
	return &reports{changed: make(chan struct{}), byRole: map[string]int{}, last: map[string]string{}}
}

func (r *reports) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	f := strings.Fields(line)
	if len(f) > 1 {
		r.last[f[len(f)-1]] = f[0]
	}
	if len(f) > 0 && (f[0] == "PUT-OK" || f[0] == "ACK-OK") {
		r.nwrites++
		r.at = append(r.at, time.Now())
		role, _, _ := strings.Cut(f[len(f)-1], ".") // the reporter: role.incarnation
		r.byRole[role]++
		if f[0] == "ACK-OK" {
			n, _ := strconv.Atoi(f[1])
			r.nacked += n
		}
	}
	if len(f) > 0 && f[0] == "PROJ-OK" {
		r.nproj++
		r.projBy, _, _ = strings.Cut(f[len(f)-1], ".")
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *reports) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func (r *reports) writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nwrites
}

func (r *reports) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nacked
}

func (r *reports) changedCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// progressTimeout bounds every wait for the children's progress: only a
// failing test waits that long.
const progressTimeout = 2 * time.Minute

// wait blocks until ok holds (checked under the lock at every line),
// failing t after progressTimeout without.
func (r *reports) wait(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(progressTimeout)
	for {
		r.mu.Lock()
		done, ch := ok(), r.changed
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no progress %s in %v; last lines: %q", what, progressTimeout, r.tail(10))
		}
	}
}

func (r *reports) tail(n int) []string {
	all := r.all()
	return all[max(0, len(all)-n):]
}

// inFlight reports whether the last line of self (role.incarnation)
// announced a write not yet answered: an Update sent (PUTTING), messages
// received and not yet acknowledged (RECV).
func (r *reports) inFlight(self string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[self] == "PUTTING" || r.last[self] == "RECV" || r.last[self] == "PROJECTING"
}

// waitWrites waits for n acknowledged writes and returns when the n-th
// was read.
func (r *reports) waitWrites(t testing.TB, n int, what string) time.Time {
	t.Helper()
	r.wait(t, what, func() bool { return r.nwrites >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[n-1]
}

// waitProgress waits until every role has n more acknowledged writes
// than now.
func (r *reports) waitProgress(t testing.TB, roles []string, n int, what string) {
	t.Helper()
	r.mu.Lock()
	base := map[string]int{}
	for k, v := range r.byRole {
		base[k] = v
	}
	r.mu.Unlock()
	r.wait(t, what, func() bool {
		for _, role := range roles {
			if r.byRole[role]-base[role] < n {
				return false
			}
		}
		return true
	})
}
