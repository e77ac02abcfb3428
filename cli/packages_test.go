package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

type job struct {
	ID   int    `msgpack:"id"`
	Kind string `msgpack:"kind"`
}

// realStore writes through versioned and queue, as a service would, at
// goldenWritten: a collection with a pruned document, a feed, and a queue
// with consumed messages, one delayed until an hour later and two dead
// letters.
func realStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		users, err := versioned.NewCollection[user](db, "users", nil)
		require.NoError(t, err)
		for age := 30; age < 35; age++ {
			_, err := users.Put(db, "alice", user{"Alice", "alice@example.com", age})
			require.NoError(t, err)
		}
		_, err = users.Put(db, "bob", user{"Bob", "bob@example.com", 45})
		require.NoError(t, err)
		dropped, err := users.Prune(db, "alice", 2)
		require.NoError(t, err)
		require.EqualValues(t, 3, dropped)

		feed, err := versioned.NewFeed[map[string]string](db, nil)
		require.NoError(t, err)
		for i := range 3 {
			_, err := feed.AppendAt(db, "audit", t0.Add(time.Duration(i)*time.Second), map[string]string{"n": strings.Repeat("*", i)})
			require.NoError(t, err)
		}

		q, err := queue.Open(db, "jobs", &queue.Options[job]{MaxAttempts: 1})
		require.NoError(t, err)
		for i := 1; i <= 6; i++ {
			_, err := q.Enqueue(db, job{i, "resize"})
			require.NoError(t, err)
		}
		_, err = q.EnqueueAt(db, goldenWritten.Add(time.Hour), job{7, "later"})
		require.NoError(t, err)
		msgs, err := q.Receive(4, time.Minute)
		require.NoError(t, err)
		require.Len(t, msgs, 4)
		require.NoError(t, q.Ack(db, msgs[0].ID, msgs[1].ID)) // 1 and 2 consumed
		require.NoError(t, q.Release(msgs[2].ID, 0))          // 3 and 4 fail their only attempt
		require.NoError(t, q.Release(msgs[3].ID, 0))
		msgs, err = q.Receive(1, time.Minute) // moves 3 and 4 to the dead letters, leases 5
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.EqualValues(t, 5, msgs[0].Seq)
		st := q.Stats()
		require.EqualValues(t, 5, st.Head)
		require.EqualValues(t, 3, st.Len)
	})
}

// check, dump, history, feed and stats agree with what the packages wrote;
// this also pins cmd/tipkv's reading of the queue's value formats.
func TestRealPackages(t *testing.T) {
	dir := realStore(t)
	require.Equal(t, "checked 14 keys (2 documents, 3 events, 5 queue messages): healthy\n", cliOK(t, "check", dir))

	out := cliOK(t, "history", dir, "users", "alice")
	require.Equal(t, `VERSION  TIME  VALUE
5        T     {"name":"Alice","email":"alice@example.com","age":34}
4        T     {"name":"Alice","email":"alice@example.com","age":33}
`, timesOut(out))
	m := jsonOf(t, cliOK(t, "history", "--json", dir, "users", "alice", "--as-of", "2"))
	require.Empty(t, m["versions"], "versions 1 to 3 were pruned: nothing as of 2, and that is no error")
	out = cliOK(t, "feed", dir, "audit")
	require.Equal(t, `POSITION             TIME                  VALUE
1740830402000000000  2025-03-01T12:00:02Z  {"n":"**"}
1740830401000000000  2025-03-01T12:00:01Z  {"n":"*"}
1740830400000000000  2025-03-01T12:00:00Z  {"n":""}
`, out)

	recs := jsonLines(t, cliOK(t, "dump", "--json", dir, "--prefix", "jobs"))
	var items, dead, state int
	for _, r := range recs {
		switch r["family"] {
		case "queue-items":
			items++
			require.Contains(t, r, "value", "%v", r)
			if r["seq"] == 7.0 {
				require.Equal(t, "later", r["value"].(map[string]any)["kind"], "%v", r)
				require.NotNil(t, r["visible_at"])
			} else {
				require.Equal(t, "resize", r["value"].(map[string]any)["kind"], "%v", r)
				require.Nil(t, r["visible_at"])
			}
		case "dead-letters":
			dead++
			require.EqualValues(t, 1, r["attempts"])
			require.NotNil(t, r["dead_at"])
		case "queue-state":
			state++
			require.EqualValues(t, 5, r["head"])
		}
	}
	require.Equal(t, []int{3, 2, 1}, []int{items, dead, state}, "%v", recs)
}

func TestQueue(t *testing.T) {
	fixNow(t) // message 7 is delayed until an hour after goldenWritten
	dir := realStore(t)
	out := cliOK(t, "queue", dir, "jobs")
	require.Regexp(t, `(?m)^queue +jobs$`, out)
	require.Regexp(t, `(?m)^head +5 +the oldest sequence number not yet consumed$`, out)
	require.Regexp(t, `(?m)^tail +8 +the sequence number the next enqueue gets$`, out)
	require.Regexp(t, `(?m)^depth +3 +messages in the queue, 1 of them delayed$`, out)
	require.Regexp(t, `(?m)^dead +2 +dead letters$`, out)
	require.Regexp(t, `(?m)^SEQ +ATTEMPTS +ENQUEUED +VALUE$`, out)
	require.Regexp(t, `(?m)^5 +1 +\S+ +\{"id":5,"kind":"resize"\}$`, out, "the lease died with its process: 5 is next")
	require.Regexp(t, `(?m)^6 +0 +\S+ +\{"id":6,"kind":"resize"\}$`, out)
	require.NotContains(t, out, `"later"`, "a delayed message is not next")

	m := jsonOf(t, cliOK(t, "queue", "--json", dir, "jobs", "-n", "1"))
	require.EqualValues(t, 5, m["head"])
	require.EqualValues(t, 8, m["tail"])
	require.EqualValues(t, 3, m["depth"])
	require.EqualValues(t, 1, m["delayed"])
	require.EqualValues(t, 2, m["dead"])
	require.Len(t, m["messages"], 1)

	out = cliOK(t, "queue", dir, "jobs", "--dead")
	require.Regexp(t, `(?m)^SEQ +ATTEMPTS +ENQUEUED +DIED +VALUE$`, out)
	require.Regexp(t, `(?m)^3 +1 +\S+ +\S+ +\{"id":3,"kind":"resize"\}$`, out)
	require.Regexp(t, `(?m)^4 +1 +\S+ +\S+ +\{"id":4,"kind":"resize"\}$`, out)
	m = jsonOf(t, cliOK(t, "queue", "--json", dir, "jobs", "--dead", "-n", "1"))
	require.EqualValues(t, 2, m["dead"])
	require.Len(t, m["dead_letters"], 1)
	require.Equal(t, map[string]any{"id": 3.0, "kind": "resize"}, m["dead_letters"].([]any)[0].(map[string]any)["value"])

	before := dirState(t, dir)
	cliOK(t, "queue", dir, "jobs")
	require.Equal(t, before, dirState(t, dir), "without --requeue or --discard, queue writes nothing")

	out = cliOK(t, "queue", dir, "jobs", "--requeue", "4")
	require.Contains(t, out, "requeued 1 dead letter(s): 4\n")
	require.Regexp(t, `(?m)^depth +4 `, out)
	require.Regexp(t, `(?m)^dead +1 `, out)
	m = jsonOf(t, cliOK(t, "queue", "--json", dir, "jobs", "--discard", "all"))
	require.Equal(t, []any{3.0}, m["discarded"])
	require.EqualValues(t, 0, m["dead"])
	require.EqualValues(t, 4, m["depth"])
	cliOK(t, "check", dir)

	_, errOut, code := cli(t, "queue", dir, "jobs", "--requeue", "3")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "not found")
	_, errOut, code = cli(t, "queue", dir, "nope")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, `the store has no queue "nope"`)
	for _, bad := range [][]string{{"--requeue", "x"}, {"--requeue", "0"}, {"--requeue", "1", "--discard", "2"}, {"-n", "-2"}} {
		_, _, code = cli(t, append([]string{"queue", dir, "jobs"}, bad...)...)
		require.Equal(t, exitUsage, code, "%v", bad)
	}
}

// stats and queue give a queue the same head, tail and depth: one
// definition, the queue package's. The tail is the sequence number the
// next enqueue gets, not the newest message's (which stats showed before:
// 7 against queue's 8 here).
func TestStatsAndQueueAgree(t *testing.T) {
	dir := realStore(t)
	q := jsonOf(t, cliOK(t, "queue", "--json", dir, "jobs"))
	st := jsonOf(t, cliOK(t, "stats", "--json", dir))
	sq := st["queues"].([]any)[0].(map[string]any)
	require.Equal(t, "jobs", sq["queue"])
	for _, f := range []string{"head", "tail", "depth", "dead", "paused", "max_in_flight"} {
		require.Equal(t, q[f], sq[f], f)
	}
	require.EqualValues(t, 8, sq["tail"])

	out := cliOK(t, "stats", dir)
	require.Regexp(t, `(?m)^QUEUE +DEPTH +HEAD +TAIL +DEAD +PAUSED +MAX IN FLIGHT$`, out)
	require.Regexp(t, `(?m)^jobs +3 +5 +8 +2 +no +-$`, out)
	require.Contains(t, out, "head: the oldest sequence number not yet consumed; tail: the sequence number the next enqueue gets.\n")
}
