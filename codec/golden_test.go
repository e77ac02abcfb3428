package codec_test

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden.txt from the current encoder")

// The golden vectors pin the key format: a change that alters any byte fails
// here. Each line is `kind input... = hex`.
func TestGolden(t *testing.T) {
	const path = "testdata/golden.txt"
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out strings.Builder
	sc := bufio.NewScanner(f)
	n := 0
	families := map[string]bool{} // the families that have a "family" line
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		lhs, want, ok := strings.Cut(line, " = ")
		require.True(t, ok, "line %q has no ' = '", line)
		got := encodeGolden(t, lhs)
		if kind, args := fieldsGolden(t, lhs); kind == "family" {
			families[args[0]] = true
		}
		fmt.Fprintf(&out, "%s = %s\n", lhs, hex.EncodeToString(got))
		if !*rewrite {
			require.Equal(t, want, hex.EncodeToString(got), "golden %q", lhs)
			checkDecodeGolden(t, lhs, got)
		}
		n++
	}
	require.NoError(t, sc.Err())
	require.Greater(t, n, 20)
	for _, l := range codec.Families() {
		require.True(t, families[l.Name], "family %s has no golden line: a new family adds one", l.Name)
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(out.String()), 0o644))
	}
}

func encodeGolden(t *testing.T, lhs string) []byte {
	kind, args := fieldsGolden(t, lhs)
	switch kind {
	case "string":
		return codec.AppendString(nil, args[0])
	case "asc":
		return codec.AppendAsc(nil, atoi(t, args[0]))
	case "desc":
		return codec.AppendDesc(nil, atoi(t, args[0]))
	case "version":
		k := codec.AppendFamily(nil, codec.FamilyVersions)
		k = codec.AppendString(codec.AppendString(k, args[0]), args[1])
		return codec.AppendDesc(k, atoi(t, args[2]))
	case "feed":
		k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeed), args[0])
		return codec.AppendDesc(k, atoi(t, args[1]))
	case "queue":
		k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), args[0])
		return codec.AppendAsc(k, atoi(t, args[1]))
	case "deadletter":
		k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyDeadLetters), args[0])
		return codec.AppendAsc(k, atoi(t, args[1]))
	case "queuestate":
		return codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), args[0])
	case "queuecontrol":
		return codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueControl), args[0])
	case "meta":
		return codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), args[0])
	case "feedcursor":
		k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeedCursors), args[0])
		return codec.AppendString(k, args[1])
	case "feedlease":
		k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeedLeases), args[0])
		return codec.AppendAsc(codec.AppendString(k, args[1]), atoi(t, args[2]))
	case "purge":
		k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyPurges), args[0])
		return codec.AppendDesc(k, atoi(t, args[1]))
	case "timeindex":
		k := codec.AppendFamily(nil, codec.FamilyTimeIndex)
		k = codec.AppendString(codec.AppendString(k, args[0]), args[1])
		return codec.AppendDesc(k, atoi(t, args[2]))
	case "family":
		return goldenFamily(t, args)
	case "keyspace":
		lo, hi := codec.Keyspace()
		if args[0] == "lo" {
			return lo
		}
		return hi
	}
	t.Fatalf("unknown golden kind %q", kind)
	return nil
}

// goldenFamily checks a line `family NAME SEGMENT... [asc(N)|desc(N)]`
// against the family table and returns the family's byte.
func goldenFamily(t *testing.T, args []string) []byte {
	for _, l := range codec.Families() {
		if l.Name != args[0] {
			continue
		}
		words := append([]string{l.Name}, l.Segments...)
		switch {
		case l.Numbered() && l.Desc:
			words = append(words, "desc("+l.Number+")")
		case l.Numbered():
			words = append(words, "asc("+l.Number+")")
		}
		require.Equal(t, args, words, "the layout of family %s changed", l.Name)
		got, ok := l.Family.Layout()
		require.True(t, ok)
		require.Equal(t, l, got)
		require.Equal(t, l.Name, l.Family.String())
		return []byte{byte(l.Family)}
	}
	t.Fatalf("no family %q in the table", args[0])
	return nil
}

func checkDecodeGolden(t *testing.T, lhs string, enc []byte) {
	kind, args := fieldsGolden(t, lhs)
	switch kind {
	case "string":
		s, rest, err := codec.DecodeString(enc)
		require.NoError(t, err)
		require.Equal(t, args[0], s)
		require.Empty(t, rest)
	case "asc":
		n, _, err := codec.DecodeAsc(enc)
		require.NoError(t, err)
		require.Equal(t, atoi(t, args[0]), n)
	case "desc":
		n, _, err := codec.DecodeDesc(enc)
		require.NoError(t, err)
		require.Equal(t, atoi(t, args[0]), n)
	case "version":
		f, rest, err := codec.DecodeFamily(enc)
		require.NoError(t, err)
		require.Equal(t, codec.FamilyVersions, f)
		c, rest, err := codec.DecodeString(rest)
		require.NoError(t, err)
		id, rest, err := codec.DecodeString(rest)
		require.NoError(t, err)
		v, rest, err := codec.DecodeDesc(rest)
		require.NoError(t, err)
		require.Equal(t, []any{args[0], args[1], atoi(t, args[2])}, []any{c, id, v})
		require.Empty(t, rest)
	}
}

// fieldsGolden splits `kind arg arg...`; args are Go-quoted strings or numbers.
func fieldsGolden(t *testing.T, lhs string) (string, []string) {
	kind, rest, _ := strings.Cut(lhs, " ")
	var args []string
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			require.NoError(t, err)
			s, err := strconv.Unquote(q)
			require.NoError(t, err)
			args = append(args, s)
			rest = rest[len(q):]
			continue
		}
		f, r, _ := strings.Cut(rest, " ")
		args = append(args, f)
		rest = r
	}
	return kind, args
}

func atoi(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}
