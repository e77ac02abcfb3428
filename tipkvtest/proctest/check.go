package proctest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

// Check drains the queue through db, reads what the children wrote and
// checks it against their reports (see the package doc), then runs
// tipkvtest.Healthy on db. Call it after Stop, with a DB on the
// children's store whose clock runs ahead (LaterClock), so that the
// leases of killed consumers have ended.
func (r *Rig) Check(t *testing.T, db *tipkv.DB) {
	t.Helper()
	q, err := queue.Open[message](db, jobsQueue, &queue.Options[message]{MaxAttempts: -1})
	if err != nil {
		t.Fatal(err)
	}
	// A call may fail while the engine recovers from the last fault: each
	// is tried again, for up to progressTimeout.
	retry := func(what string, f func() error) {
		t.Helper()
		deadline := time.Now().Add(progressTimeout)
		for {
			err := f()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(50 * time.Millisecond) // a retry's pause
		}
	}
	for more := true; more; {
		retry("drain the queue", func() error {
			ms, err := q.Receive(100, time.Minute)
			if err != nil {
				return err
			}
			more = len(ms) > 0
			ids := make([]queue.ID, len(ms))
			for i, m := range ms {
				ids[i] = m.ID
				r.log.add(fmt.Sprintf("DRAIN %s %d", m.Value.ID, m.Seq))
			}
			return q.Ack(db, ids...)
		})
	}
	var st store
	st.docs = map[string]map[int64]string{}
	for _, role := range r.roles {
		if !strings.HasPrefix(role, "consumer") {
			continue
		}
		done, err := queue.Open[consumed](db, doneQueue+role, nil)
		if err != nil {
			t.Fatal(err)
		}
		retry("read "+done.Name(), func() error {
			ms, err := done.Peek(1 << 20)
			if err != nil {
				return err
			}
			for _, m := range ms {
				st.consumed = append(st.consumed, m.Value)
			}
			return nil
		})
	}
	docs, err := versioned.NewCollection[doc](db, collection, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range docIDs {
		retry("read "+id, func() error {
			vs := map[int64]string{}
			for d, err := range docs.History(id, tipkv.Query{}) {
				if err != nil {
					return err
				}
				vs[d.Version] = d.Value.Token
			}
			st.docs[id] = vs
			return nil
		})
	}
	feed, err := versioned.NewFeed[doc](db, nil)
	if err != nil {
		t.Fatal(err)
	}
	retry("read the feed", func() error {
		st.events = map[int64]string{}
		for e, err := range feed.Newest(feedStream, tipkv.Query{}) {
			if err != nil {
				return err
			}
			st.events[e.Position] = e.Value.Token
		}
		return nil
	})
	if r.cfg.Groups > 0 {
		st.groups, st.groupN = map[string][]string{}, r.cfg.Groups
		for k := range min(r.cfg.Groups, r.cfg.PerBatch) {
			g := groupOf(k, r.cfg.Groups)
			retry("read the feed of group "+g, func() error {
				var ids []string
				for e, err := range feed.Newest(groupFeed+g, tipkv.Query{}) {
					if err != nil {
						return err
					}
					ids = append(ids, e.Value.Token)
				}
				slices.Reverse(ids)
				st.groups[g] = ids
				return nil
			})
		}
	}
	check(t, r.log.all(), st, r.cfg.PerBatch, r.cfg.Lease)
	if len(r.members) > 0 {
		checkMembers(t, r.log.all(), feed, st.events, retry)
	}
	tipkvtest.Healthy(t, db)
}

// store is what the children left in the store.
type store struct {
	docs     map[string]map[int64]string // document id: version: token
	events   map[int64]string            // feed position: token
	consumed []consumed                  // the consumers' records
	groups   map[string][]string         // group: its messages in the order they were acknowledged
	groupN   int                         // Config.Groups
}

// check checks the reports (the children's, then Check's DRAIN lines)
// against st. It reports every fault it finds with t.Errorf.
func check(t testing.TB, lines []string, st store, perBatch int, lease time.Duration) {
	t.Helper()
	type delivery struct {
		seq           int64
		before, after int64
		by            string
		attempts      int64 // the delivery's Attempts: the deliveries' order (0: not reported)
	}
	var (
		putting    = map[string]bool{} // tokens an Update was sent for
		putOK      = map[string]bool{}
		putErr     = map[string]bool{}
		putAt      = map[string][2]int64{} // version, position
		putDoc     = map[string]string{}
		deliveries = map[string][]delivery{}
		drained    = map[string]int{}
		seqs       = map[int64]string{}
		counts     = map[string]int{}
	)
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		counts[f[0]]++
		switch f[0] {
		case "PUTTING": // PUTTING token doc self
			putting[f[1]] = true
			putDoc[f[1]] = f[2]
		case "PUT-OK": // PUT-OK token doc version position self
			putOK[f[1]] = true
			putAt[f[1]] = [2]int64{num(f[3]), num(f[4])}
		case "PUT-ERR":
			putErr[f[1]] = true
		case "RECV", "DRAIN": // RECV id seq before after self; DRAIN id seq
			seq := num(f[2])
			if other, ok := seqs[seq]; ok && other != f[1] {
				t.Errorf("sequence number %d holds messages %s and %s", seq, other, f[1])
			}
			seqs[seq] = f[1]
			if f[0] == "DRAIN" {
				drained[f[1]]++
				continue
			}
			d := delivery{seq, num(f[3]), num(f[4]), f[5], 0}
			if len(f) > 6 {
				d.attempts = num(f[6])
			}
			deliveries[f[1]] = append(deliveries[f[1]], d)
		}
	}

	// Documents: every acknowledged version holds its writer's token;
	// every stored version was sent by someone; versions are 1..n.
	landed := map[string]bool{} // tokens stored as a document version
	for id, vs := range st.docs {
		for v := int64(1); v <= int64(len(vs)); v++ {
			token, ok := vs[v]
			switch {
			case !ok:
				t.Errorf("%s: version %d missing among %d", id, v, len(vs))
			case !putting[token]:
				t.Errorf("%s version %d holds %s, which nobody wrote", id, v, token)
			case putDoc[token] != id:
				t.Errorf("%s version %d holds %s, written to %s", id, v, token, putDoc[token])
			case landed[token]:
				t.Errorf("%s stored twice (again as %s version %d)", token, id, v)
			}
			landed[token] = true
		}
	}
	for token := range putOK {
		id, at := putDoc[token], putAt[token]
		if got, ok := st.docs[id][at[0]]; !ok {
			t.Errorf("acknowledged %s version %d (%s) is lost", id, at[0], token)
		} else if got != token {
			t.Errorf("%s version %d was acknowledged to %s but holds %s: a version reused", id, at[0], token, got)
		}
		if got, ok := st.events[at[1]]; !ok {
			t.Errorf("acknowledged event %s at position %d is lost", token, at[1])
		} else if got != token {
			t.Errorf("position %d was acknowledged to %s but holds %s", at[1], token, got)
		}
	}

	// The feed: each event has its document version and each version its
	// event (one Update wrote both, or neither).
	inFeed := map[string]bool{}
	for pos, token := range st.events {
		if inFeed[token] {
			t.Errorf("event %s appended twice (again at %d)", token, pos)
		}
		inFeed[token] = true
		if !landed[token] {
			t.Errorf("event %s at %d has no document version: half an Update applied", token, pos)
		}
	}
	for token := range landed {
		if !inFeed[token] {
			t.Errorf("document version %s has no event: half an Update applied", token)
		}
		if putErr[token] {
			t.Errorf("Update %s failed with a known outcome, yet its document version is stored", token)
		}
	}

	// Messages: those of an Update that landed are consumed or drained,
	// each exactly once; no other message is.
	present := map[string]int{}
	for id, n := range drained {
		present[id] += n
	}
	for _, c := range st.consumed {
		present[c.ID]++
		ok := false
		for _, d := range deliveries[c.ID] {
			ok = ok || d.by == c.By
		}
		if !ok {
			t.Errorf("message %s recorded as consumed by %s, which never received it", c.ID, c.By)
		}
	}
	for id, n := range present {
		token, _, _ := strings.Cut(id, "/")
		switch {
		case !putting[token]:
			t.Errorf("message %s consumed or drained, never enqueued", id)
		case !landed[token]:
			t.Errorf("message %s consumed or drained, but its Update %s did not land: half an Update applied", id, token)
		case n > 1:
			t.Errorf("message %s consumed or drained %d times", id, n)
		}
	}
	lost := 0
	for token := range landed {
		for k := range perBatch {
			if id := fmt.Sprintf("%s/%d", token, k); present[id] == 0 {
				lost++
				t.Errorf("message %s of a batch that landed is lost", id)
			}
		}
	}
	for id := range deliveries {
		if token, _, _ := strings.Cut(id, "/"); !putting[token] {
			t.Errorf("message %s delivered, never enqueued", id)
		}
	}

	// Groups: each group's messages were acknowledged in queue order, the
	// oldest first, none skipped: the group's feed lists the first of
	// them by sequence number (the drain takes the rest).
	seqOf := map[string]int64{}
	for seq, id := range seqs {
		seqOf[id] = seq
	}
	for g, acked := range st.groups {
		var all []string // the group's messages that were delivered or drained, by seq
		for _, id := range seqs {
			if k, err := strconv.Atoi(id[strings.LastIndexByte(id, '/')+1:]); err == nil && groupOf(k, st.groupN) == g {
				all = append(all, id)
			}
		}
		slices.SortFunc(all, func(a, b string) int { return cmp.Compare(seqOf[a], seqOf[b]) })
		for i, id := range acked {
			if i >= len(all) || all[i] != id {
				want := "nothing"
				if i < len(all) {
					want = fmt.Sprintf("%s (seq %d)", all[i], seqOf[all[i]])
				}
				t.Errorf("group %s: acknowledgement %d is %s (seq %d), where queue order has %s", g, i, id, seqOf[id], want)
				break
			}
		}
	}

	// Leases: a message is delivered again only after the lease of its
	// previous delivery ended.
	for id, ds := range deliveries {
		// In the order the deliveries happened: their attempt counts. (A
		// ReceiveWait that began first may have waited past a later one's
		// delivery: the times around the calls do not order them.)
		slices.SortFunc(ds, func(a, b delivery) int {
			return cmp.Or(cmp.Compare(a.attempts, b.attempts), cmp.Compare(a.before, b.before))
		})
		for i := 1; i < len(ds); i++ {
			prev, cur := ds[i-1], ds[i]
			if end := prev.before + int64(lease); cur.after < end {
				t.Errorf("message %s delivered to %s while %s's lease held (%v before its end)", id, cur.by, prev.by, time.Duration(end-cur.after))
			}
		}
	}
	t.Logf("reports: %v; %d Updates landed (%d acknowledged, %d unknown outcomes, %d known failures), %d messages consumed, %d drained at the end, %d lost",
		counts, len(landed), len(putOK), counts["PUT-UNK"], len(putErr), len(st.consumed), len(drained), lost)
	if len(putOK) == 0 {
		t.Errorf("no Update was acknowledged")
	}
}
