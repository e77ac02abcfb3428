package cli

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/vmihailenco/msgpack/v5"
)

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestDecodeValue(t *testing.T) {
	type inner struct {
		B []byte `msgpack:"b"`
	}
	type doc struct {
		Z     string         `msgpack:"z"`
		A     int64          `msgpack:"a"`
		F     float64        `msgpack:"f"`
		In    inner          `msgpack:"in"`
		IntKs map[int]string `msgpack:"ints"`
		T     time.Time      `msgpack:"t"`
		Nil   *int           `msgpack:"nil"`
		Arr   []any          `msgpack:"arr"`
	}
	v := doc{
		Z: "<z&>", A: -7, F: 1.5, In: inner{B: []byte{0, 1, 0xff}},
		IntKs: map[int]string{3: "three"},
		T:     time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Arr:   []any{true, uint64(math.MaxUint64), "x"},
	}
	got, err := decodeValue(mp(t, v))
	require.NoError(t, err)
	require.Equal(t,
		`{"z":"<z&>","a":-7,"f":1.5,"in":{"b":"AAH/"},"ints":{"3":"three"},"t":"2025-01-02T03:04:05.000000006Z","nil":null,"arr":[true,18446744073709551615,"x"]}`,
		jsonText(t, got), "fields in struct order, bin as base64, int keys as text, time as RFC 3339")

	for f, want := range map[float64]string{math.NaN(): `"NaN"`, math.Inf(1): `"+Inf"`, math.Inf(-1): `"-Inf"`} {
		got, err := decodeValue(mp(t, f))
		require.NoError(t, err)
		require.Equal(t, want, jsonText(t, got))
	}

	// An extension type nobody registered is shown, not refused.
	ext := []byte{0xd4, 0x05, 0x2a} // fixext1, type 5, data 0x2a
	got, err = decodeValue(ext)
	require.NoError(t, err)
	require.Equal(t, `{"$ext":5,"$data":"Kg=="}`, jsonText(t, got))
}

func TestDecodeValueRefusesWhatIsNotOneMsgpackValue(t *testing.T) {
	whole := mp(t, map[string]any{"a": "bcd"})
	for name, data := range map[string][]byte{
		"empty":     {},
		"truncated": whole[:len(whole)-1],
		"trailing":  append(bytes.Clone(whole), 0x01),
		"text":      []byte("hello"), // 'h' is a fixint, then 4 bytes left
		"bad code":  {0xc1},
		"huge bin":  {0xc6, 0xff, 0xff, 0xff, 0xff, 0x00},
		"huge arr":  {0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		_, err := decodeValue(data)
		require.Error(t, err, name)
	}
	deep := append(bytes.Repeat([]byte{0x91}, maxDepth+10), 0x00) // nested arrays
	_, err := decodeValue(deep)
	require.ErrorContains(t, err, "too deep")
}

func TestDecodeKey(t *testing.T) {
	k := decodeKey(vkey("users", "a|b", 3))
	require.True(t, k.complete())
	require.Equal(t, `users | "a|b" | 3`, k.text())
	require.Equal(t, `{"family":"versions","collection":"users","id":"a|b","version":3}`, jsonText(t, k.fields()))

	k = decodeKey(vkey("c", "\xff\x00", 1))
	require.Equal(t, `c | "\xff\x00" | 1`, k.text())
	require.Equal(t, `{"family":"versions","collection":"c","id":{"hex":"ff00"},"version":1}`, jsonText(t, k.fields()))

	for raw, bad := range map[string]string{
		"":                                   "empty key",
		"\x0eabc":                            "unknown family 0x0e",
		"\x01users\x00\x01id":                "bad id segment",
		"\x01users\x00\x01id\x00\x01":        "bad version",
		"\x03q\x00\x01extra":                 "5 unexpected bytes after the queue",
		string(append(vkey("c", "d", 1), 0)): "1 unexpected bytes after the version",
	} {
		k := decodeKey([]byte(raw))
		require.False(t, k.complete(), "%q", raw)
		require.Contains(t, k.bad, bad, "%q", raw)
		require.Equal(t, "0x", k.text()[:2], "a bad key is shown in hex")
	}
}

func TestNamePrefixRange(t *testing.T) {
	lo, hi := namePrefix(codec.FamilyVersions, "us")
	for name, in := range map[string]bool{"us": true, "users": true, "us\x00x": true, "u": false, "ut": false, "v": false} {
		k := vkey(name, "id", 1)
		require.Equal(t, in, bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0, name)
	}
}

// The decoders never panic, whatever the bytes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x01, 'u', 0, 1, 'a', 0, 1, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, []byte{0x81, 0xa1, 'a', 0x01})
	f.Add([]byte{0x02, 'q', 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 1}, []byte{0x01, 0x00, 0x02, 0x00, 0xc0})
	f.Add([]byte{0x03, 'q', 0, 1}, []byte{0x01, 0x05, 0x09})
	f.Add([]byte{0x00, 'f', 'o', 'r', 'm', 'a', 't', 0, 1}, []byte("1"))
	f.Add([]byte{0x05}, []byte{0xd4, 0xff, 0x00})
	f.Add([]byte{0x04, 0, 0xff, 0, 1}, []byte{0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	ts, _ := msgpack.Marshal(time.Unix(1, 2))
	f.Add([]byte{0x01}, ts)
	f.Fuzz(func(t *testing.T, k, v []byte) {
		r := decodeRecord(decodeKey(k), v, docfmt.Rules{})
		_ = r.valueText()
		if _, err := marshal(r.fields(true)); err != nil {
			t.Fatalf("fields do not marshal: %v", err)
		}
		_ = r.key.text()
	})
}

// Values stored with codec.JSON are shown as the JSON they are, and are
// no problem for check; msgpack values are unchanged.
func TestJSONValues(t *testing.T) {
	dir := jsonValueStore(t)
	out := cliOK(t, "history", dir, "pages", "home")
	require.Equal(t, "VERSION  VALUE\n2        [1,2,{\"a\":null}]\n1        {\"title\":\"Home\",\"body\":\"<p>hi</p>\"}\n", out)
	m := jsonOf(t, cliOK(t, "history", "--json", dir, "pages", "home"))
	require.Equal(t, map[string]any{"version": 1.0, "value": map[string]any{"title": "Home", "body": "<p>hi</p>"}, "value_encoding": "json"},
		m["versions"].([]any)[1])
	recs := jsonLines(t, cliOK(t, "dump", "--json", dir, "--family", "feed"))
	require.Equal(t, "started", recs[0]["value"])
	require.Equal(t, "json", recs[0]["value_encoding"])
	recs = jsonLines(t, cliOK(t, "dump", "--json", dir, "--prefix", "users"))
	require.NotContains(t, recs[0], "value_encoding", "msgpack is the default, not marked")
	cliOK(t, "check", dir)
}

// A stream's trim mark (position 0 of the feed family) is no event: dump
// shows its position, and a mark of the wrong size is named.
func TestDecodeTrimMark(t *testing.T) {
	k := codec.AppendDesc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeed), "s"), 0)
	r := decodeRecord(decodeKey(k), codec.AppendAsc(nil, 1700000000000000000), docfmt.Rules{})
	require.Empty(t, r.bad)
	require.Equal(t, `{"trim_mark":1700000000000000000,"time":"2023-11-14T22:13:20Z"}`, jsonText(t, r.header))
	r = decodeRecord(decodeKey(k), []byte{1, 2}, docfmt.Rules{})
	require.Equal(t, "trim mark of 2 bytes, want 8", r.bad)
}
