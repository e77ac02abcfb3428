package console_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
	"github.com/vmihailenco/msgpack/v5"
)

type shape struct {
	Zeta  string         `msgpack:"zeta"`
	Alpha int            `msgpack:"alpha"`
	Bin   []byte         `msgpack:"bin"`
	When  time.Time      `msgpack:"when"`
	F     float64        `msgpack:"f"`
	Keys  map[int]string `msgpack:"keys"`
	Nil   *string        `msgpack:"nil"`
	List  []any          `msgpack:"list"`
}

// MsgpackRenderer writes any msgpack value as JSON: struct fields in their
// order (not sorted), bytes in base64, times in RFC 3339, non-string keys
// as their JSON text, NaN as a string; and refuses what is not exactly
// one msgpack value.
func TestMsgpackRenderer(t *testing.T) {
	when := time.Date(2025, 3, 1, 9, 0, 0, 5, time.UTC)
	b, err := msgpack.Marshal(shape{Zeta: "z", Alpha: 1, Bin: []byte{1, 2}, When: when, F: math.NaN(), Keys: map[int]string{7: "seven"}, List: []any{true, 1.5, "x"}})
	require.NoError(t, err)
	js, err := console.MsgpackRenderer(b)
	require.NoError(t, err)
	require.Equal(t, `{"zeta":"z","alpha":1,"bin":"AQI=","when":"2025-03-01T09:00:00.000000005Z","f":"NaN","keys":{"7":"seven"},"nil":null,"list":[true,1.5,"x"]}`, string(js))

	_, err = console.MsgpackRenderer(append(b, 0x01))
	require.ErrorContains(t, err, "1 bytes left")
	_, err = console.MsgpackRenderer(b[:len(b)-3])
	require.Error(t, err)
	_, err = console.MsgpackRenderer(nil)
	require.Error(t, err)
	deep := []byte(strings.Repeat("\x91", 2000) + "\x01") // arrays nested 2,000 deep
	_, err = console.MsgpackRenderer(deep)
	require.ErrorContains(t, err, "too deep")
}

// A Render hook chooses how each collection's values show: CodecRenderer
// for a codec of the service's; a renderer that fails or panics leaves
// the value shown as text or hex, with the error.
func TestRenderHook(t *testing.T) {
	db := testutil.OpenMem(t)
	type page struct {
		Title string `json:"title"`
	}
	pages, err := versioned.NewCollection(db, "pages", &versioned.Options[page]{Codec: codec.JSON[page]{}})
	require.NoError(t, err)
	_, err = pages.Put(db, "home", page{Title: "Home"})
	require.NoError(t, err)
	notes, err := versioned.NewCollection(db, "notes", &versioned.Options[string]{Codec: codec.String{}})
	require.NoError(t, err)
	_, err = notes.Put(db, "n", "hello")
	require.NoError(t, err)

	c, err := console.New(db, &console.Options{Render: func(k console.Kind, name string) console.Renderer {
		switch {
		case k == console.KindCollection && name == "pages":
			return console.CodecRenderer[page](codec.JSON[page]{})
		case name == "notes":
			return func([]byte) (json.RawMessage, error) { panic("boom") }
		}
		return nil
	}})
	require.NoError(t, err)
	defer c.Close()
	var h console.History
	getJSON(t, c, "/api/document?name=pages&id=home", http.StatusOK, &h)
	require.JSONEq(t, `{"title":"Home"}`, string(h.Versions[0].Value.JSON))
	getJSON(t, c, "/api/document?name=notes&id=n", http.StatusOK, &h)
	require.Equal(t, "hello", h.Versions[0].Value.Text)
	require.Contains(t, h.Versions[0].Value.Error, "panicked: boom")
}
