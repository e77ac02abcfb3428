package tipkv_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// The compatibility corpus (testdata/compat): for each store format, a
// store written by that format's code and the manifest of what that code
// read back from it (its generator is beside it). The types mirror the
// generators'.
type compatManifest struct {
	Format      int                           `json:"format"`
	ReadClock   time.Time                     `json:"read_clock"`
	Collections []compatColl                  `json:"collections"`
	Streams     []compatStream                `json:"streams"`
	Queues      []compatQueue                 `json:"queues"`
	Keys        []struct{ Key, Value string } `json:"keys"`
}

type compatColl struct {
	Name      string `json:"name"`
	Codec     string `json:"codec"`
	TTL       bool   `json:"ttl"`
	Documents []struct {
		ID      string          `json:"id"`
		Latest  *compatVersion  `json:"latest"`
		History []compatVersion `json:"history"`
	} `json:"documents"`
}

type compatVersion struct {
	Version int64           `json:"version"`
	Deleted bool            `json:"deleted,omitempty"`
	Value   string          `json:"value"`
	Decoded map[string]any  `json:"decoded,omitempty"`
	Expires string          `json:"expires,omitempty"`
	Time    string          `json:"time,omitempty"` // the commit time; none before format 4
	Meta    *tipkv.Metadata `json:"meta,omitempty"` // the metadata; none before format 4
}

type compatStream struct {
	Name   string `json:"name"`
	Codec  string `json:"codec"`
	Events []struct {
		Position int64           `json:"position"`
		Value    string          `json:"value"`
		Decoded  map[string]any  `json:"decoded,omitempty"`
		Meta     *tipkv.Metadata `json:"meta,omitempty"` // none before format 4
	} `json:"events"`
	Cursors map[string]int64 `json:"cursors,omitempty"`
	Leases  map[string]struct {
		Member   string `json:"member"`
		Epoch    int64  `json:"epoch"`
		Deadline string `json:"deadline,omitempty"`
	} `json:"leases,omitempty"`
}

type compatQueue struct {
	Name        string          `json:"name"`
	Codec       string          `json:"codec"`
	Messages    []compatMessage `json:"messages"`
	Dead        []compatMessage `json:"dead"`
	Paused      bool            `json:"paused,omitempty"`        // none before the control key (format 4)
	MaxInFlight int             `json:"max_in_flight,omitempty"` // the same
}

type compatMessage struct {
	Seq      int64             `json:"seq"`
	Value    string            `json:"value"`
	Decoded  map[string]any    `json:"decoded,omitempty"`
	Attempts int               `json:"attempts"`
	Enqueued string            `json:"enqueued"`
	Died     string            `json:"died,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Meta     *tipkv.Metadata   `json:"meta,omitempty"` // the metadata; none before format 4
}

// Person is the generators' struct: its json tags differ from its Go
// field names, which a store created at format 1 stores.
type Person struct {
	FullName string `json:"full_name"`
	Age      int    `json:"age"`
	Email    string
}

// decoded is Person as the manifests write it (numbers as JSON reads them).
func (p Person) decoded() map[string]any {
	return map[string]any{"FullName": p.FullName, "Age": float64(p.Age), "Email": p.Email}
}

// Every corpus opens with today's code: read-only, it reads as its own
// format's code read it; opened for writing it is upgraded and reads the
// same (a purge of expired documents in collections without a TTL finds
// none); reopened, the same again; and the checker finds no problem. The
// upgrade changes no key, and no value but the document versions it must
// escape.
func TestCompatCorpus(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "compat", "format*"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	seen := map[int]bool{}
	for _, corpus := range dirs {
		t.Run(filepath.Base(corpus), func(t *testing.T) {
			var m compatManifest
			b, err := os.ReadFile(filepath.Join(corpus, "manifest.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &m))
			seen[m.Format] = true
			dir := filepath.Join(t.TempDir(), "store")
			copyDir(t, filepath.Join(corpus, "store"), dir)
			clock := func() time.Time { return m.ReadClock }

			db, err := tipkv.Open(dir, &tipkv.Options{ReadOnly: true, Clock: clock})
			require.NoError(t, err)
			compare(t, db, &m, "read-only, before the upgrade")
			checkCorpus(t, db, &m)
			require.NoError(t, db.Close())

			db, err = tipkv.Open(dir, &tipkv.Options{Clock: clock})
			require.NoError(t, err)
			compare(t, db, &m, "after the upgrade")
			for _, c := range m.Collections {
				if c.TTL {
					continue // its expired documents would go
				}
				ttl, err := versioned.NewCollection[[]byte](db, c.Name, &versioned.Options[[]byte]{Codec: codec.Raw{}, TTL: time.Hour, PurgeInterval: -1})
				require.NoError(t, err)
				st, err := ttl.PurgeExpired(context.Background())
				require.NoError(t, err)
				require.Zero(t, st.Purged, "collection %q: none of its documents has a time to live", c.Name)
			}
			compare(t, db, &m, "after PurgeExpired")
			sameKeys(t, db, &m)
			checkCorpus(t, db, &m)
			require.NoError(t, db.Close())
			marker, err := os.ReadFile(filepath.Join(dir, "TIPKV"))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("tipkv store format %d\n", tipkv.FormatVersion), string(marker), "the marker file names the new format")

			db, err = tipkv.Open(dir, &tipkv.Options{Clock: clock})
			require.NoError(t, err)
			compare(t, db, &m, "reopened")
			checkCorpus(t, db, &m)
			require.NoError(t, db.Close())
		})
	}
	require.True(t, seen[tipkv.FormatVersion], "testdata/compat has no corpus of format %d, the current one: add it (testdata/compat/README.md)", tipkv.FormatVersion)
	for f := 1; f <= tipkv.FormatVersion; f++ {
		require.True(t, seen[f], "testdata/compat has no corpus of format %d", f)
	}
}

// copyDir copies the files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// compare reads everything the manifest lists through the public API and
// requires what the corpus's own code read.
func compare(t *testing.T, db *tipkv.DB, m *compatManifest, when string) {
	t.Helper()
	for _, c := range m.Collections {
		raw, err := versioned.NewCollection[[]byte](db, c.Name, &versioned.Options[[]byte]{Codec: codec.Raw{}})
		require.NoError(t, err)
		people, err := versioned.NewCollection[Person](db, c.Name, nil)
		require.NoError(t, err)
		texts, err := versioned.NewCollection[string](db, c.Name, &versioned.Options[string]{Codec: codec.String{}})
		require.NoError(t, err)
		for _, d := range c.Documents {
			where := fmt.Sprintf("%s: collection %q, document %q", when, c.Name, d.ID)
			l, err := raw.Latest(d.ID)
			if d.Latest == nil {
				require.ErrorIs(t, err, tipkv.ErrNotFound, where)
			} else {
				require.NoError(t, err, where)
				require.Equal(t, d.Latest.Version, l.Version, where)
				require.Equal(t, d.Latest.Value, hex.EncodeToString(l.Value), where)
			}
			var got []compatVersion
			for v, err := range raw.History(d.ID, tipkv.Query{}) {
				require.NoError(t, err, where)
				cv := compatVersion{Version: v.Version, Deleted: v.Deleted, Value: hex.EncodeToString(v.Value), Time: timeText(v.Time)}
				if v.HasMetadata() {
					m, err := v.Metadata()
					require.NoError(t, err, where)
					cv.Meta = &m
				}
				got = append(got, cv)
				require.Equal(t, v.Time.IsZero(), v.Untimed(), where)
			}
			var want []compatVersion
			for _, v := range d.History {
				want = append(want, compatVersion{Version: v.Version, Deleted: v.Deleted, Value: v.Value, Time: v.Time, Meta: v.Meta})
			}
			require.Equal(t, want, got, "%s: history", where)
			switch c.Codec {
			case "person":
				for _, v := range d.History {
					p, err := people.Get(d.ID, v.Version)
					require.NoError(t, err, where)
					require.Equal(t, v.Decoded, p.Value.decoded(), "%s: version %d decoded", where, v.Version)
				}
			case "string":
				s, err := texts.Latest(d.ID)
				require.NoError(t, err, where)
				require.Equal(t, string(unhex(t, d.Latest.Value)), s.Value, where)
			}
		}
	}
	for _, s := range m.Streams {
		where := fmt.Sprintf("%s: stream %q", when, s.Name)
		raw, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
		require.NoError(t, err)
		people, err := versioned.NewFeed[Person](db, nil)
		require.NoError(t, err)
		var got, want []string
		i := 0
		for e, err := range raw.Newest(s.Name, tipkv.Query{}) {
			require.NoError(t, err, where)
			got = append(got, fmt.Sprintf("%d %x", e.Position, e.Value))
			if i < len(s.Events) {
				want := s.Events[i].Meta
				require.Equal(t, want != nil, e.HasMetadata(), "%s: position %d", where, e.Position)
				if want != nil {
					m, err := e.Metadata()
					require.NoError(t, err, where)
					require.Equal(t, *want, m, "%s: metadata at position %d", where, e.Position)
				}
			}
			i++
		}
		for _, e := range s.Events {
			want = append(want, fmt.Sprintf("%d %s", e.Position, e.Value))
		}
		require.Equal(t, want, got, where)
		if s.Codec == "person" {
			i := 0
			for e, err := range people.Newest(s.Name, tipkv.Query{}) {
				require.NoError(t, err, where)
				require.Equal(t, s.Events[i].Decoded, e.Value.decoded(), where)
				i++
			}
		}
		for g, pos := range s.Cursors {
			n, err := raw.Cursor(s.Name, g)
			require.NoError(t, err, where)
			require.Equal(t, pos, n, "%s: cursor of group %q", where, g)
		}
		for g, l := range s.Leases {
			h, err := raw.Holder(s.Name, g)
			require.NoError(t, err, where)
			deadline := ""
			if !h.Deadline.IsZero() {
				deadline = h.Deadline.Format(time.RFC3339Nano)
			}
			require.Equal(t, []any{l.Member, l.Epoch, l.Deadline}, []any{h.Member, h.Epoch, deadline}, "%s: lease of group %q", where, g)
		}
	}
	for _, q := range m.Queues {
		where := fmt.Sprintf("%s: queue %q", when, q.Name)
		raw, err := queue.Open[[]byte](db, q.Name, &queue.Options[[]byte]{Codec: codec.Raw{}})
		require.NoError(t, err, where)
		msgs, err := raw.Peek(100)
		require.NoError(t, err, where)
		var got []compatMessage
		for _, msg := range msgs {
			got = append(got, compatMessage{Seq: msg.Seq, Value: hex.EncodeToString(msg.Value), Attempts: msg.Attempts,
				Enqueued: msg.Enqueued.UTC().Format(time.RFC3339Nano), Headers: msg.Headers, Meta: compatMeta(t, msg.HasMetadata(), msg.Metadata)})
		}
		require.Equal(t, stripDecoded(q.Messages), got, "%s: messages", where)
		got = nil
		for d, err := range raw.DeadLetters() {
			require.NoError(t, err, where)
			got = append(got, compatMessage{Seq: d.Seq, Value: hex.EncodeToString(d.Value), Attempts: d.Attempts,
				Enqueued: d.Enqueued.UTC().Format(time.RFC3339Nano), Died: d.Died.UTC().Format(time.RFC3339Nano), Headers: d.Headers, Meta: compatMeta(t, d.HasMetadata(), d.Metadata)})
		}
		require.Equal(t, stripDecoded(q.Dead), got, "%s: dead letters", where)
		st, err := raw.ReadStats()
		require.NoError(t, err, where)
		require.Equal(t, []any{q.Paused, q.MaxInFlight}, []any{st.Paused, st.MaxInFlight}, "%s: paused and max in flight", where)
		if q.Codec == "person" {
			p, err := queue.Open[Person](db, q.Name, nil)
			require.NoError(t, err, where)
			msgs, err := p.Peek(100)
			require.NoError(t, err, where)
			require.Len(t, msgs, len(q.Messages), where)
			for i, msg := range msgs {
				require.Equal(t, q.Messages[i].Decoded, msg.Value.decoded(), where)
			}
		}
	}
}

// compatMeta returns a message's metadata as the manifests hold it: nil
// for none.
func compatMeta(t *testing.T, has bool, get func() (tipkv.Metadata, error)) *tipkv.Metadata {
	t.Helper()
	if !has {
		return nil
	}
	m, err := get()
	require.NoError(t, err)
	return &m
}

// timeText renders a commit time as the manifests do: "" for none.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func stripDecoded(ms []compatMessage) []compatMessage {
	var out []compatMessage
	for _, m := range ms {
		m.Decoded = nil
		out = append(out, m)
	}
	return out
}

// checkCorpus runs the store checker, as tipkv check does, with the raw
// names of the corpus.
func checkCorpus(t *testing.T, db *tipkv.DB, m *compatManifest) {
	t.Helper()
	raw := map[string]bool{}
	for _, c := range m.Collections {
		raw[c.Name] = raw[c.Name] || c.Codec != "person"
	}
	for _, s := range m.Streams {
		raw[s.Name] = raw[s.Name] || s.Codec != "person"
	}
	for _, q := range m.Queues {
		raw[q.Name] = raw[q.Name] || q.Codec != "person"
	}
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	rep := check.Store(s, check.Options{Values: true, Raw: raw, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, rep.Err())
}

// sameKeys requires that the upgrade kept every key of the corpus, every
// value of the cursors and queue messages as it was, and every document
// version and feed event as it was or as docfmt.Upgrade and UpgradeEvent
// rewrite it.
func sameKeys(t *testing.T, db *tipkv.DB, m *compatManifest) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	for _, kv := range m.Keys {
		k, old := unhex(t, kv.Key), unhex(t, kv.Value)
		v, err := s.Get(k)
		switch codec.Family(k[0]) {
		case codec.FamilyMeta, codec.FamilyQueueState:
			continue // the format, and a queue's state stored at Close
		case codec.FamilyVersions:
			require.NoError(t, err, "key %x", k)
			want, _ := docfmt.Upgrade(m.Format, old)
			require.True(t, bytes.Equal(want, v), "version %x: %x, want %x", k, v, want)
		case codec.FamilyFeed:
			require.NoError(t, err, "key %x", k)
			want, _ := docfmt.UpgradeEvent(m.Format, old)
			require.True(t, bytes.Equal(want, v), "event %x: %x, want %x", k, v, want)
		default:
			if errors.Is(err, tipkv.ErrNotFound) {
				require.Failf(t, "a key is gone", "%x", k)
			}
			require.NoError(t, err)
			require.True(t, bytes.Equal(old, v), "key %x: %x, was %x", k, v, old)
		}
	}
}
