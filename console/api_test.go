package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

// Every JSON endpoint answers what the store holds, on Pebble and on a
// shared engine (several DBs on one store, as processes on etcd or
// PostgreSQL would be): the console reads through the public packages,
// which read the store there.
func TestEndpoints(t *testing.T) {
	for _, eng := range []struct {
		name string
		db   func(t *testing.T) *tipkv.DB
	}{
		{"pebble", func(t *testing.T) *tipkv.DB { return testutil.OpenMem(t) }},
		{"shared", func(t *testing.T) *tipkv.DB {
			dbs := tipkvtest.OpenShared(t, 2, nil)
			fill(t, dbs[1]) // another process wrote the data
			return dbs[0]
		}},
	} {
		t.Run(eng.name, func(t *testing.T) {
			db := eng.db(t)
			if eng.name == "pebble" {
				fill(t, db)
			}
			c, err := console.New(db, nil)
			require.NoError(t, err)
			defer c.Close()

			var o console.Overview
			getJSON(t, c, "/api/overview", http.StatusOK, &o)
			require.Equal(t, 1, o.Collections)
			require.Equal(t, 1, o.Streams)
			require.Len(t, o.Queues, 1)
			require.Equal(t, console.QueueSummary{Name: "jobs", Head: 2, Tail: 4, Depth: 2, Leased: 1, DeadLetters: 1}, o.Queues[0])
			require.True(t, o.Charts)

			var names console.Names
			getJSON(t, c, "/api/collections", http.StatusOK, &names)
			require.Equal(t, []console.Name{{Name: "orders"}}, names.Names)
			getJSON(t, c, "/api/streams", http.StatusOK, &names)
			require.Equal(t, []console.Name{{Name: "audit"}}, names.Names)

			var docs console.Documents
			getJSON(t, c, "/api/collection?"+q("name", "orders"), http.StatusOK, &docs)
			require.Len(t, docs.Documents, 2) // "gone" is deleted
			require.Equal(t, "o-17", docs.Documents[0].ID)
			require.Equal(t, int64(3), docs.Documents[0].Version)
			require.JSONEq(t, `{"status":"shipped","total":42.5}`, string(docs.Documents[0].Value.JSON))
			require.Empty(t, docs.Next)
			// Paged: one per page, the cursor leads on.
			getJSON(t, c, "/api/collection?"+q("name", "orders", "limit", "1"), http.StatusOK, &docs)
			require.Len(t, docs.Documents, 1)
			require.NotEmpty(t, docs.Next)
			getJSON(t, c, "/api/collection?"+q("name", "orders", "limit", "1", "after", docs.Next), http.StatusOK, &docs)
			require.Equal(t, "o-18", docs.Documents[0].ID)
			require.Empty(t, docs.Next)
			getJSON(t, c, "/api/collection?"+q("name", "orders", "prefix", "o-18"), http.StatusOK, &docs)
			require.Len(t, docs.Documents, 1)

			var h console.History
			getJSON(t, c, "/api/document?"+q("name", "orders", "id", "o-17", "limit", "2", "v", "1"), http.StatusOK, &h)
			require.Equal(t, int64(3), h.Count)
			require.Equal(t, []int64{3, 2}, versionsOf(h.Versions))
			require.Equal(t, &tipkv.Metadata{Author: "ada", Reason: "courier picked it up"}, h.Versions[0].Metadata)
			require.Nil(t, h.Versions[1].Metadata, "written without")
			require.NotNil(t, h.Versions[1].Committed)
			require.True(t, h.Versions[1].Committed.Before(*h.Versions[0].Committed), "commit times follow versions")
			require.NotEmpty(t, h.Next)
			require.Equal(t, int64(1), h.AsOf.Version)
			require.JSONEq(t, `{"status":"placed","total":42.5}`, string(h.AsOf.Value.JSON))
			getJSON(t, c, "/api/document?"+q("name", "orders", "id", "o-17", "after", h.Next), http.StatusOK, &h)
			require.Equal(t, []int64{1}, versionsOf(h.Versions))
			getJSON(t, c, "/api/document?"+q("name", "orders", "id", "gone"), http.StatusOK, &h)
			require.True(t, h.Versions[0].Deleted)

			var d console.Diff
			getJSON(t, c, "/api/diff?"+q("name", "orders", "id", "o-17"), http.StatusOK, &d)
			require.Equal(t, int64(2), d.A.Version)
			require.Equal(t, int64(3), d.B.Version)
			require.Equal(t, 2, d.Changed)
			require.Contains(t, d.Lines, console.DiffLine{Op: "-", Text: `  "status": "paid",`})
			require.Contains(t, d.Lines, console.DiffLine{Op: "+", Text: `  "status": "shipped",`})

			var ev console.Events
			getJSON(t, c, "/api/stream?"+q("name", "audit", "limit", "2"), http.StatusOK, &ev)
			require.Len(t, ev.Events, 2)
			require.Equal(t, ev.Newest, ev.Events[0].Position)
			require.JSONEq(t, `{"page":"/pay"}`, string(ev.Events[0].Value.JSON))
			require.Equal(t, []console.Group{{Name: "billing", Position: ev.Newest - 1, Lag: 1, Pending: 1, OldestPending: ev.Newest}}, ev.Groups)
			getJSON(t, c, "/api/stream?"+q("name", "audit", "after", ev.Next), http.StatusOK, &ev)
			require.Len(t, ev.Events, 1)
			require.JSONEq(t, `{"page":"/"}`, string(ev.Events[0].Value.JSON))

			var qs console.Queues
			getJSON(t, c, "/api/queues", http.StatusOK, &qs)
			require.Equal(t, o.Queues, qs.Queues)

			var qp console.QueuePage
			getJSON(t, c, "/api/queue?"+q("name", "jobs", "limit", "1"), http.StatusOK, &qp)
			require.Equal(t, o.Queues[0], qp.QueueSummary)
			require.Len(t, qp.Messages, 1)
			require.Equal(t, "leased", qp.Messages[0].State)
			require.NotNil(t, qp.Messages[0].Until)
			require.Equal(t, "2", qp.Next)
			require.Len(t, qp.OldestDeadLetters, 1)
			require.Equal(t, map[string]string{"traceparent": "00-abc-01"}, qp.OldestDeadLetters[0].Headers)
			require.JSONEq(t, `"first"`, string(qp.OldestDeadLetters[0].Value.JSON))
			require.False(t, qp.Actions)
			getJSON(t, c, "/api/queue?"+q("name", "jobs", "after", qp.Next), http.StatusOK, &qp)
			require.Equal(t, int64(3), qp.Messages[0].Seq)
			require.Equal(t, "ready", qp.Messages[0].State)

			var m console.Message
			getJSON(t, c, "/api/message?"+q("name", "jobs", "seq", "3"), http.StatusOK, &m)
			require.Equal(t, int64(3), m.Seq)
			require.JSONEq(t, `"third"`, string(m.Value.JSON))
			var dl console.DeadLetter
			getJSON(t, c, "/api/deadletter?"+q("name", "jobs", "seq", "1"), http.StatusOK, &dl)
			require.Equal(t, 1, dl.Attempts)

			var s console.Samples
			getJSON(t, c, "/api/samples", http.StatusOK, &s)
			require.NotZero(t, s.Interval)
		})
	}
}

func versionsOf(ds []console.Document) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Version
	}
	return out
}

// Bad parameters are 400, and missing names, documents, versions and
// messages 404, each with a JSON error that says what; nothing is
// registered for a name that does not exist.
func TestEndpointErrors(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	c, err := console.New(db, nil)
	require.NoError(t, err)
	defer c.Close()
	long := strings.Repeat("x", versioned.MaxIDSize+1)
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/api/nothing", http.StatusNotFound, "no such page"},
		{"/api/families?name=x", http.StatusNotFound, "no such page"},
		{"/api/collection", http.StatusBadRequest, `"name" is required`},
		{"/api/collection?name=", http.StatusBadRequest, "empty"},
		{"/api/collection?name=orders&bogus=1", http.StatusBadRequest, `unknown parameter "bogus"`},
		{"/api/collection?name=orders&name=orders", http.StatusBadRequest, "given 2 times"},
		{"/api/collection?name=orders&limit=0", http.StatusBadRequest, "limit"},
		{"/api/collection?name=orders&limit=1001", http.StatusBadRequest, "limit"},
		{"/api/collection?name=orders&limit=-1", http.StatusBadRequest, "limit"},
		{"/api/collection?name=orders&limit=01", http.StatusBadRequest, "limit"},
		{"/api/collection?name=orders&after=garbage", http.StatusBadRequest, "cursor"},
		{"/api/collection?name=%zz", http.StatusBadRequest, "invalid URL escape"},
		{"/api/collection?name=" + strings.Repeat("n", 257), http.StatusBadRequest, "over the limit"},
		{"/api/collection?name=nope", http.StatusNotFound, `no collection "nope"`},
		{"/api/document?name=orders", http.StatusBadRequest, `"id" is required`},
		{"/api/document?name=orders&id=" + long, http.StatusBadRequest, "over the limit"},
		{"/api/document?name=orders&id=nope", http.StatusNotFound, `no document "nope"`},
		{"/api/document?name=orders&id=%00%ff", http.StatusNotFound, `no document "\x00\xff"`},
		{"/api/document?name=orders&id=o-17&v=x", http.StatusBadRequest, `"v"`},
		{"/api/diff?name=orders&id=o-17&a=9", http.StatusNotFound, "no version 9"},
		{"/api/diff?name=orders&id=nope", http.StatusNotFound, `no document "nope"`},
		{"/api/stream?name=nope", http.StatusNotFound, `no stream "nope"`},
		{"/api/stream?name=audit&after=bad", http.StatusBadRequest, "cursor"},
		{"/api/queue?name=nope", http.StatusNotFound, `no queue "nope"`},
		{"/api/queue?name=jobs&after=x", http.StatusBadRequest, `"after"`},
		{"/api/message?name=jobs", http.StatusBadRequest, "want one sequence number"},
		{"/api/message?name=jobs&seq=1&seq=2", http.StatusBadRequest, "want one sequence number"},
		{"/api/message?name=jobs&seq=0", http.StatusBadRequest, `"seq"`},
		{"/api/message?name=jobs&seq=1", http.StatusNotFound, "no message 1"},
		{"/api/message?name=jobs&seq=99", http.StatusNotFound, "no message 99"},
		{"/api/deadletter?name=jobs&seq=2", http.StatusNotFound, "no dead letter 2"},
		{"/api/tail?name=audit&after=x", http.StatusBadRequest, "tail after"},
		{"/api/tail", http.StatusBadRequest, `"name" is required`},
	} {
		var e apiErr
		getJSON(t, c, tc.path, tc.status, &e)
		require.Equal(t, tc.status, e.Status, tc.path)
		require.Contains(t, e.Error, tc.says, tc.path)
	}
	// The pages answer the same statuses, as pages.
	r := get(t, c, "/collection?name=nope")
	require.Equal(t, http.StatusNotFound, r.code)
	require.Contains(t, r.body, `no collection &#34;nope&#34;`)
	r = get(t, c, "/nothing")
	require.Equal(t, http.StatusNotFound, r.code)
	// A method the route does not take.
	rec := get(t, c, "/api/requeue")
	require.Equal(t, http.StatusMethodNotAllowed, rec.code)
	require.Equal(t, "POST", rec.hdr.Get("Allow"))

	// The names that did not exist were not opened: no metrics for them.
	m, err := db.Metrics()
	require.NoError(t, err)
	for _, x := range m.Collections {
		require.NotEqual(t, "nope", x.Name)
	}
	for _, x := range m.Queues {
		require.NotEqual(t, "nope", x.Name)
	}
}

// A value too large to show whole is cut, and says so; one too large to
// decode is shown as the start of its bytes. The page stays small.
func TestHugeValues(t *testing.T) {
	db := testutil.OpenMem(t)
	big, err := versioned.NewCollection[map[string]string](db, "big", nil)
	require.NoError(t, err)
	_, err = big.Put(db, "doc", map[string]string{"blob": strings.Repeat("a", 2<<10)})
	require.NoError(t, err)
	_, err = big.Put(db, "huge", map[string]string{"blob": strings.Repeat("b", versioned.MaxValueSize-100)})
	require.NoError(t, err)
	raw, err := versioned.NewCollection(db, "raw", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	_, err = raw.Put(db, "bin", []byte{0xc1, 0x00, 0xff, 0x01})
	require.NoError(t, err)
	_, err = raw.Put(db, "text", []byte("plain text, not msgpack"))
	require.NoError(t, err)

	c, err := console.New(db, &console.Options{MaxValueBytes: 1 << 10})
	require.NoError(t, err)
	defer c.Close()
	var h console.History
	getJSON(t, c, "/api/document?"+q("name", "big", "id", "doc"), http.StatusOK, &h)
	v := h.Versions[0].Value
	require.True(t, v.Truncated)
	require.Nil(t, v.JSON)
	require.Len(t, v.Text, 1<<10)
	require.True(t, strings.HasPrefix(v.Text, `{"blob":"aaa`))
	require.Greater(t, v.Size, 2<<10)

	r := get(t, c, "/api/document?"+q("name", "big", "id", "huge"))
	require.Equal(t, http.StatusOK, r.code)
	require.Less(t, len(r.body), 8<<10)
	h = console.History{}
	require.NoError(t, json.Unmarshal([]byte(r.body), &h))
	v = h.Versions[0].Value
	require.True(t, v.Truncated)
	require.Contains(t, v.Error, "too large to render")
	require.Len(t, v.Hex, 1<<10)

	getJSON(t, c, "/api/document?"+q("name", "raw", "id", "bin"), http.StatusOK, &h)
	require.Equal(t, "c100ff01", h.Versions[0].Value.Hex)
	require.NotEmpty(t, h.Versions[0].Value.Error)
	getJSON(t, c, "/api/document?"+q("name", "raw", "id", "text"), http.StatusOK, &h)
	require.Equal(t, "plain text, not msgpack", h.Versions[0].Value.Text)

	// The page of a huge document stays small too.
	r = get(t, c, "/document?"+q("name", "big", "id", "huge"))
	require.Equal(t, http.StatusOK, r.code)
	require.Less(t, len(r.body), 16<<10)
}

// Once the DB has closed, every endpoint answers 503 and every page says
// so; nothing panics.
func TestClosedDB(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	c, err := console.New(db, nil)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, db.Close())
	for _, path := range []string{
		"/api/overview", "/api/collections", "/api/collection?name=orders", "/api/document?name=orders&id=o-17",
		"/api/diff?name=orders&id=o-17", "/api/streams", "/api/stream?name=audit", "/api/queues",
		"/api/queue?name=jobs", "/api/message?name=jobs&seq=3", "/api/deadletter?name=jobs&seq=1",
		"/api/tail?name=audit",
	} {
		var e apiErr
		getJSON(t, c, path, http.StatusServiceUnavailable, &e)
		require.Contains(t, e.Error, "closed", path)
	}
	r := get(t, c, "/")
	require.Equal(t, http.StatusServiceUnavailable, r.code)
	// Static files still serve.
	require.Equal(t, http.StatusOK, get(t, c, "/static/console.js").code)
}

// New refuses what it cannot serve safely: a nil DB, a bad prefix,
// actions without a logger.
func TestNewChecksOptions(t *testing.T) {
	db := testutil.OpenMem(t)
	_, err := console.New(nil, nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	for _, p := range []string{"console", "/console/", "/"} {
		_, err = console.New(db, &console.Options{Prefix: p})
		require.ErrorIs(t, err, tipkv.ErrInvalid, p)
	}
	allow := func(*http.Request, console.Action) error { return nil }
	_, err = console.New(db, &console.Options{Authorize: allow})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "need a logger")
	lg, _ := newLogger()
	c, err := console.New(db, &console.Options{Authorize: allow, Logger: lg})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	// The DB's own logger is enough.
	db2, err := tipkv.Open("", &tipkv.Options{InMemory: true, Logger: lg})
	require.NoError(t, err)
	defer db2.Close()
	c, err = console.New(db2, &console.Options{Authorize: allow})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// Under a prefix every route moves there, links start with it, and
// the rest of the mux is not the console's.
func TestPrefix(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	c, err := console.New(db, &console.Options{Prefix: "/ops/console"})
	require.NoError(t, err)
	defer c.Close()
	r := get(t, c, "/ops/console/collections")
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, `href="/ops/console/collection?name=orders"`)
	require.Contains(t, r.body, `src="/ops/console/static/console.js"`)
	var o console.Overview
	getJSON(t, c, "/ops/console/api/overview", http.StatusOK, &o)
	require.Equal(t, http.StatusNotFound, get(t, c, "/collections").code)
	require.Equal(t, http.StatusNotFound, get(t, c, "/ops/consolex/").code)
	r = get(t, c, "/ops/console")
	require.Equal(t, http.StatusMovedPermanently, r.code)
	require.Equal(t, "/ops/console/", r.hdr.Get("Location"))
}
