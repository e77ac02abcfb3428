package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
)

func TestCheckHealthy(t *testing.T) {
	dir := sample(t)
	out := cliOK(t, "check", dir)
	require.Equal(t, "checked 16 keys (3 documents, 5 events, 3 queue messages): healthy\n", out)
	m := jsonOf(t, cliOK(t, "check", "--json", dir))
	require.Equal(t, true, m["healthy"])
	require.EqualValues(t, 0, m["problem_count"])
	require.Empty(t, m["problems"])

	// Pruned documents start above version 1: still dense.
	dir = writeStore(t, func(db *tipkv.DB) {
		set(t, db, vkey("c", "d", 7), mp(t, 7), vkey("c", "d", 8), mp(t, 8))
	})
	cliOK(t, "check", dir)
}

// Every kind of problem check finds, each named with its key; exit 1.
func TestCheckProblems(t *testing.T) {
	enq := t0.UnixNano()
	dir := writeStore(t, func(db *tipkv.DB) {
		set(t, db,
			vkey("c", "gap", 5), mp(t, 5), // 4 and 3 missing
			vkey("c", "gap", 2), mp(t, 2),
			vkey("c", "gap", 1), mp(t, 1),
			vkey("c", "zero", 0), mp(t, 0),
			vkey("c", "text", 1), []byte("plain text"),
			vkey("raw", "r", 1), []byte("plain text"),
			fkey("s", 1), []byte{0xc1},
			[]byte{0x01, 'c', 0x00}, []byte("v"),
			[]byte{0x07}, []byte("x"),
			qkey(codec.FamilyQueueItems, "q", 1), qvalue(t, queueItemTag, 0, enq, 0, "below head"),
			qkey(codec.FamilyQueueItems, "q", 4), []byte{0x09, 0x00},
			segPrefix(codec.FamilyQueueState, "q"), qstate(3, 5),
			segPrefix(codec.FamilyQueueState, "bad"), []byte{0x01, 0x80},
			segPrefix(codec.FamilyQueueState, "back"), qstate(7, 6),
			qkey(codec.FamilyQueueItems, "q", 6), qvalue(t, queueItemTag, 0, enq, 0, "twice"),
			qkey(codec.FamilyDeadLetters, "q", 6), qvalue(t, queueDeadTag, 3, enq, enq, "twice"),
			qkey(codec.FamilyDeadLetters, "q", 2), append([]byte{queueDeadRawTag}, 0x09, 0x00),
		)
	})
	out, errOut, code := cli(t, "check", dir, "--raw", "raw,other")
	require.Equal(t, exitFail, code, "%s%s", out, errOut)
	require.Empty(t, errOut)
	for _, want := range []string{
		`versions +versions +c \| gap \| 2 +versions 5 then 2: 3 to 4 missing`,
		`value +versions +c \| text \| 1 +not msgpack: 9 bytes left after the msgpack value`,
		`versions +versions +c \| zero \| 0 +version 0 is below 1`,
		`value +feed +s \| 1 +not msgpack: msgpack: unknown code c1`,
		`key +versions +0x016300 +bad collection segment: .*segment ends inside an escape`,
		`key +0x07 +0x07 +unknown family 0x07`,
		`value +queue-items +q \| 4 +queue value: tipkv: corrupt data: value does not start with tag 0x01`,
		`value +queue-state +bad +queue state: tipkv: corrupt data: queue state: bad head`,
		`value +dead-letters +q \| 2 +a corrupt queue message, quarantined`,
		`queue +queue-items +q \| 1 +message below the queue's head 3`,
		`queue +queue-state +back +head 7 is past tail 6`,
		`queue +dead-letters +q \| 6 +sequence number 6 is both a message and a dead letter`,
	} {
		require.Regexp(t, "(?m)^"+want, out)
	}
	require.NotContains(t, out, "raw | r", "--raw exempts collection raw")
	require.Contains(t, out, ": 12 problem(s)\n")

	short, _, code := cli(t, "check", dir, "--max", "2", "--raw", "raw")
	require.Equal(t, exitFail, code)
	require.Equal(t, 5, strings.Count(short, "\n"), "a header, 2 problems, the rest counted, a verdict:\n%s", short)
	require.Contains(t, short, "... and 10 more (--max)")

	out, _, code = cli(t, "check", "--json", dir)
	require.Equal(t, exitFail, code)
	m := jsonOf(t, out)
	require.Equal(t, false, m["healthy"])
	require.EqualValues(t, 13, m["problem_count"], "without --raw, collection raw's text is a problem too")
	first := m["problems"].([]any)[1].(map[string]any)
	require.Equal(t, "versions", first["kind"])
	require.Equal(t, "c", first["collection"])
	require.Equal(t, "gap", first["id"])
	require.EqualValues(t, 2, first["version"])
	require.NotEmpty(t, first["key_hex"])
}

func TestCheckMissingFormatKey(t *testing.T) {
	dir := writeStore(t, func(db *tipkv.DB) {
		s, err := linkStore(db)
		require.NoError(t, err)
		b := s.NewBatch()
		require.NoError(t, b.Delete(segPrefix(codec.FamilyMeta, "format")))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
	})
	// A store whose marker says it was created but whose format key is
	// gone has lost its data: it is refused before check can look.
	_, errOut, code := cli(t, "check", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "lost its data")
}
