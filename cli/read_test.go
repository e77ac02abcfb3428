package cli

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/queue"
)

func TestDump(t *testing.T) {
	dir := sample(t)
	out := cliOK(t, "dump", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 17, "a header and 16 keys:\n%s", out)
	require.Regexp(t, `^FAMILY +KEY +VALUE$`, lines[0])
	require.Regexp(t, `^meta +format +"`+strconv.Itoa(tipkv.FormatVersion)+`"$`, lines[1])
	require.Regexp(t, `^meta +value-names +"json"$`, lines[2])
	require.Regexp(t, `^versions +users \| alice \| 3 +\{"name":"Alice","email":"alice@example.com","age":31\}$`, lines[4], "newest version first")
	require.Regexp(t, `^queue-items +jobs \| 3 +\{"attempts":1,"enqueued":"2025-03-01T12:00:00Z","visible_at":null\} \{"job":3\}$`, lines[8])
	require.Regexp(t, `^queue-state +jobs +\{"head":3,"tail":5\}$`, lines[10])
	require.Regexp(t, `^feed +clicks \| 1740830640000000000 +\{"page":"/p4"\}$`, lines[11])
	require.Regexp(t, `^dead-letters +jobs \| 2 +\{"attempts":10,.*"dead_at":"2025-03-01T13:00:00Z"\} \{"job":2\}$`, lines[16])

	recs := jsonLines(t, cliOK(t, "dump", "--json", dir))
	require.Len(t, recs, 16)
	require.Equal(t, map[string]any{
		"family": "versions", "collection": "users", "id": "alice", "version": 3.0,
		"value": map[string]any{"name": "Alice", "email": "alice@example.com", "age": 31.0},
	}, recs[3])
	require.Equal(t, map[string]any{"family": "queue-state", "queue": "jobs", "head": 3.0, "tail": 5.0}, recs[9])
}

func TestDumpFilters(t *testing.T) {
	dir := sample(t)
	count := func(args ...string) int {
		return len(jsonLines(t, cliOK(t, append([]string{"dump", "--json", dir}, args...)...)))
	}
	require.Equal(t, 5, count("--family", "versions"))
	require.Equal(t, 5, count("--family", "1"))
	require.Equal(t, 5, count("--family", "0x04"))
	require.Equal(t, 4, count("--family", "versions", "--prefix", "us"))
	require.Equal(t, 0, count("--family", "versions", "--prefix", "usersx"))
	require.Equal(t, 4, count("--prefix", "jobs"), "two items, the state and a dead letter")
	require.Equal(t, 3, count("-n", "3"))
	require.Equal(t, 2, count("--prefix", "jobs", "-n", "2"))
	require.Equal(t, 5, count("--prefix", "cl"), "stream names match")
	require.Equal(t, 4, count("--prefix", "j"), "queue names match: items, state, dead letter")
	require.Equal(t, 1, count("--prefix", "f", "--family", "meta"), "meta names match")
	require.Equal(t, 0, count("--prefix", "alice"), "document ids do not")
	require.Equal(t, 0, count("--prefix", "Users"), "case matters")

	// One prefix reaches every family whose name begins with it.
	dir = prefixStore(t)
	var fams []string
	for _, r := range jsonLines(t, cliOK(t, "dump", "--json", dir, "--prefix", "orders")) {
		fams = append(fams, r["family"].(string))
	}
	require.Equal(t, []string{"versions", "queue-items", "queue-state", "feed", "dead-letters"}, fams)

	rec := jsonLines(t, cliOK(t, "dump", "--json", "--hex", dir, "--family", "meta"))[0]
	require.Equal(t, "00666f726d61740001", rec["key_hex"])
	require.Equal(t, hex.EncodeToString([]byte(strconv.Itoa(tipkv.FormatVersion))), rec["value_hex"])
	out := cliOK(t, "dump", "--hex", dir, "--family", "meta")
	require.Regexp(t, `meta +0x00666f726d61740001 +0x`+hex.EncodeToString([]byte(strconv.Itoa(tipkv.FormatVersion)))+`\n`, out)
}

// Keys tipkv did not write and values that are not msgpack are shown in
// hex, never a crash.
func TestDumpForeignData(t *testing.T) {
	dir := foreignStore(t)
	out := cliOK(t, "dump", dir)
	require.Contains(t, out, "0x0e78")
	require.Contains(t, out, "0xdead")
	require.Regexp(t, `versions +0x016300 +0x76\n`, out)
	require.Regexp(t, `versions +c \| d \| 1 +0x6e6f74206d73677061636b \(neither msgpack nor JSON\)\n`, out)
	require.Regexp(t, `versions +c \| "\\xff" \| 1 +"AQID"\n`, out)

	recs := jsonLines(t, cliOK(t, "dump", "--json", dir))
	require.Len(t, recs, 6)
	byHex := map[string]map[string]any{}
	for _, r := range recs {
		if h, ok := r["key_hex"].(string); ok {
			byHex[h] = r
		}
	}
	require.Equal(t, "0x0e", byHex["0e78"]["family"])
	require.Equal(t, "unknown family 0x0e", byHex["0e78"]["key_error"])
	require.Equal(t, "dead", byHex["0e78"]["value_hex"])
	require.Contains(t, byHex["016300"]["key_error"], "bad collection segment")
	var notMsgpack, binary map[string]any
	for _, r := range recs {
		if r["id"] == "d" {
			notMsgpack = r
		} else if id, ok := r["id"].(map[string]any); ok && id["hex"] == "ff" {
			binary = r
		}
	}
	require.Equal(t, "6e6f74206d73677061636b", notMsgpack["value_hex"])
	require.Contains(t, notMsgpack["value_error"], "left after the msgpack value")
	require.Equal(t, "AQID", binary["value"], "bin is base64")
}

func TestHistory(t *testing.T) {
	dir := sample(t)
	out := cliOK(t, "history", dir, "users", "alice")
	require.Equal(t, `VERSION  VALUE
3        {"name":"Alice","email":"alice@example.com","age":31}
2        {"name":"Alice","email":"alice@example.com","age":30}
1        {"name":"Alice","email":"alice@old.example","age":30}
`, out)
	out = cliOK(t, "history", dir, "users", "alice", "-n", "1")
	require.Equal(t, 2, strings.Count(out, "\n"))

	m := jsonOf(t, cliOK(t, "history", "--json", dir, "users", "alice", "--as-of", "2", "-n", "1"))
	require.Equal(t, map[string]any{
		"collection": "users", "id": "alice", "latest": 3.0,
		"versions": []any{map[string]any{"version": 2.0, "value": map[string]any{"name": "Alice", "email": "alice@example.com", "age": 30.0}}},
	}, m)
	m = jsonOf(t, cliOK(t, "history", "--json", dir, "users", "alice", "--as-of", "99"))
	require.Len(t, m["versions"], 3, "as of a future version: everything")

	out, errOut, code := cli(t, "history", dir, "users", "carol")
	require.Equal(t, exitFail, code)
	require.Empty(t, out)
	require.Contains(t, errOut, `collection "users" has no document "carol"`)
	_, _, code = cli(t, "history", dir, "user", "alice")
	require.Equal(t, exitFail, code, "a collection name is not a prefix")
}

func TestFeed(t *testing.T) {
	dir := sample(t)
	out := cliOK(t, "feed", dir, "clicks", "-n", "2")
	require.Equal(t, `POSITION             TIME                  VALUE
1740830640000000000  2025-03-01T12:04:00Z  {"page":"/p4"}
1740830580000000000  2025-03-01T12:03:00Z  {"page":"/p3"}
`, out)

	events := func(args ...string) []any {
		m := jsonOf(t, cliOK(t, append([]string{"feed", "--json", dir, "clicks"}, args...)...))
		require.Equal(t, "clicks", m["stream"])
		return m["events"].([]any)
	}
	require.Len(t, events(), 5)
	require.Len(t, events("-n", "0"), 5)
	require.Len(t, events("--since", "2025-03-01T12:03:00Z"), 2, "since is inclusive")
	require.Len(t, events("--since", strconv.FormatInt(t0.Add(150*time.Second).UnixNano(), 10)), 2)
	require.Len(t, events("--since", "1h"), 0, "the sample's events are older than an hour")
	require.Len(t, events("--since", "2025-03-01T11:00:00Z", "-n", "3"), 3)
	e := events("-n", "1")[0].(map[string]any)
	require.Equal(t, map[string]any{"position": 1740830640000000000.0, "time": "2025-03-01T12:04:00Z", "value": map[string]any{"page": "/p4"}}, e)

	_, errOut, code := cli(t, "feed", dir, "nope")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, `stream "nope" has no events`)
}

func TestParseSince(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for s, want := range map[string]time.Time{
		"2025-05-31T23:00:00Z":        now.Add(-time.Hour),
		"2025-05-31T23:00:00.5+00:00": now.Add(-time.Hour + 500*time.Millisecond),
		"90m":                         now.Add(-90 * time.Minute),
		"1748736000000000000":         now,
	} {
		got, err := parseSince(s, now)
		require.NoError(t, err, s)
		require.Equal(t, want.UnixNano(), got, s)
	}
	for _, s := range []string{"", "-1h", "tomorrow", "2025-13-01"} {
		_, err := parseSince(s, now)
		require.Error(t, err, s)
	}
}

func TestStats(t *testing.T) {
	dir := sample(t)
	out := cliOK(t, "stats", dir)
	require.Regexp(t, `(?m)^keys +16$`, out)
	require.Regexp(t, `(?m)^versions +5 +112 B +187 B$`, out)
	require.Regexp(t, `(?m)^users +2 +4$`, out)
	require.Regexp(t, `(?m)^orders +1 +1$`, out)
	require.Regexp(t, `(?m)^clicks +5 +2025-03-01T12:00:00Z +2025-03-01T12:04:00Z$`, out)
	require.Regexp(t, `(?m)^QUEUE +DEPTH +HEAD +TAIL +DEAD +PAUSED +MAX IN FLIGHT$`, out)
	require.Regexp(t, `(?m)^jobs +2 +3 +5 +1 +no +-$`, out)
	require.Contains(t, out, "no sstables yet: every key is in the memtable", "the sample store was never flushed")

	m := jsonOf(t, cliOK(t, "stats", "--json", dir))
	require.EqualValues(t, 16, m["keys"])
	require.EqualValues(t, 0, m["bad_keys"])
	require.Positive(t, m["disk_usage"])
	require.Len(t, m["families"], 14)
	require.Equal(t, []any{
		map[string]any{"collection": "orders", "documents": 1.0, "versions": 1.0},
		map[string]any{"collection": "users", "documents": 2.0, "versions": 4.0},
	}, m["collections"])
	require.Equal(t, []any{map[string]any{
		"queue": "jobs", "depth": 2.0, "head": 3.0, "tail": 5.0, "dead": 1.0, "paused": false, "max_in_flight": 0.0,
		"state": map[string]any{"head": 3.0, "tail": 5.0},
	}}, m["queues"])
	lsm := m["lsm"].(map[string]any)
	require.Len(t, lsm["levels"], 7)
}

// Tombstones show in the LSM section once they reach an sstable.
func TestStatsTombstones(t *testing.T) {
	dir := tombstoneStore(t)
	m := jsonOf(t, cliOK(t, "stats", "--json", dir))
	lsm := m["lsm"].(map[string]any)
	require.EqualValues(t, 1, lsm["point_tombstones"])
	require.EqualValues(t, 1, lsm["range_tombstones"])
	require.EqualValues(t, 13, m["keys"], "the format and value-names keys, versions 2 and 11 to 20")
	out := cliOK(t, "stats", dir)
	require.Regexp(t, `(?m)^LEVEL +TABLES +SIZE +SCORE +ENTRIES +POINT TOMBSTONES +RANGE TOMBSTONES\nL0 +1 +`, out, "empty levels are left out")
	require.Regexp(t, `(?m)^total +1 +\S+ \S+ +\d+ +1 +1$`, out)
}

// A queue that does not open (here its state key is corrupt) is listed
// with the error, and stats exits 1 after printing the rest.
func TestStatsBrokenQueue(t *testing.T) {
	dir := writeStore(t, func(db *tipkv.DB) {
		set(t, db, segPrefix(codec.FamilyQueueState, "bad"), []byte{0x01, 0x80})
	})
	out, errOut, code := cli(t, "stats", dir)
	require.Equal(t, exitFail, code)
	require.Regexp(t, `(?m)^bad +- +- +- +0 +- +- +queue "bad": .*corrupt`, out)
	require.Contains(t, errOut, "tipkv check lists the problems")
	out, errOut, code = cli(t, "stats", "--json", dir)
	require.Equal(t, exitFail, code)
	q := jsonOf(t, out)["queues"].([]any)[0].(map[string]any)
	require.Contains(t, q["error"], "corrupt")
	require.Equal(t, "corrupt", jsonOf(t, errOut)["kind"])
}

// A document version with a time to live shows its document and its expiry.
func TestDecodeShowsTheExpiry(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v, err := codec.Msgpack[map[string]int]{}.Append(nil, map[string]int{"a": 1})
	require.NoError(t, err)
	d := decodeVersion(append(docfmt.AppendHeader(nil, exp.UnixNano()), v...), docfmt.Rules{})
	require.NoError(t, d.err)
	require.Equal(t, `{"a":1} (expires 2030-01-02T03:04:05Z)`, d.cell())
	require.Contains(t, d.fields(), field{"expires", "2030-01-02T03:04:05Z"})
}

// Only document versions have expiry headers and escapes, and only from
// format 3: a feed event that starts with C1 01, or a document of a format
// 2 store that does, is shown as stored, not as a value that expires.
func TestC1ValuesShowAsStored(t *testing.T) {
	header := []byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 5, 0x01}
	doc := codec.AppendDesc(codec.AppendString(codec.AppendString([]byte{0x01}, "blobs"), "a"), 1)
	event := codec.AppendDesc(codec.AppendString([]byte{0x04}, "raw"), 7)
	for _, format := range []string{"2", strconv.Itoa(tipkv.FormatVersion)} {
		dir := writeStore(t, func(db *tipkv.DB) {
			set(t, db, event, header, codec.AppendString([]byte{0x00}, "format"), []byte(format))
			if format == "2" {
				set(t, db, doc, header)
			} else {
				set(t, db, doc, append([]byte{0xc1, 0x00}, header...)) // what Put writes
			}
		})
		out := cliOK(t, "feed", dir, "raw")
		require.Contains(t, out, "c101000000000000000501 (neither msgpack nor JSON)", "format %s", format)
		require.NotContains(t, out, "expires")
		out = cliOK(t, "history", dir, "blobs", "a")
		require.Contains(t, out, "c101000000000000000501 (neither msgpack nor JSON)", "format %s", format)
		require.NotContains(t, out, "expires")
	}
}

// A queue message of a group shows its group in the dump.
func TestDumpGroup(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	q, err := queue.Open[string](db, "jobs", nil)
	require.NoError(t, err)
	_, err = q.EnqueueWith(db, queue.EnqueueOptions{Group: "tenant-7"}, "a")
	require.NoError(t, err)
	_, err = q.Enqueue(db, "b")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	recs := jsonLines(t, cliOK(t, "dump", "--json", dir, "--family", "queue-items"))
	require.Len(t, recs, 2)
	require.Equal(t, "tenant-7", recs[0]["group"])
	require.NotContains(t, recs[1], "group")
}
