package tipkvtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// misuseCases returns the misuse tests: bad input writes nothing, calls
// during and after Close end with ErrClosed, and a write on the DB inside
// an Update that holds its document fails at once. Each ends with its
// stores checked healthy.
func misuseCases() []testCase {
	return []testCase{
		{"DocumentBadInputWritesNothing", checked(testDocumentBadInput)},
		{"ValuesStartingWithTheMarkerByte", checked(testValuesStartingWithTheMarkerByte)},
		{"FeedBadInputWritesNothing", checked(testFeedBadInput)},
		{"BatchOfAnotherDBIsRefused", checked(testBatchOfAnotherDBIsRefused)},
		{"CallsAfterClose", checked(testCallsAfterClose)},
		{"CloseDuringCalls", checked(testCloseDuringCalls)},
		{"WriteOnTheDBInsideUpdate", checked(testWriteOnTheDBInsideUpdate)},
	}
}

func testDocumentBadInput(t *testing.T, b backend) {
	db := b.Open(t, nil)
	_, err := versioned.NewCollection[person](db, "", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = versioned.NewCollection[person](db, strings.Repeat("n", versioned.MaxNameSize+1), nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = versioned.NewCollection[person](nil, "users", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	blobs, err := versioned.NewCollection[[]byte](db, "blobs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	_, err = blobs.Put(db, "", []byte("x"))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Put(db, strings.Repeat("i", versioned.MaxIDSize+1), []byte("x"))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Put(db, "big", make([]byte, versioned.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.PutIf(db, "big", []byte("x"), -1)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Latest("big")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "a refused Put writes nothing")

	for name, f := range map[string]func() error{
		"Latest":      func() error { _, err := blobs.Latest(""); return err },
		"Get":         func() error { _, err := blobs.Get("", 1); return err },
		"AsOf":        func() error { _, err := blobs.AsOf("", 1); return err },
		"Count":       func() error { _, err := blobs.Count(""); return err },
		"LatestMany":  func() error { _, err := blobs.LatestMany("a", ""); return err },
		"Delete":      func() error { _, err := blobs.Delete(db, ""); return err },
		"Prune":       func() error { _, err := blobs.Prune(db, "", 1); return err },
		"Prune 0":     func() error { _, err := blobs.Prune(db, "a", 0); return err },
		"PruneBefore": func() error { _, err := blobs.PruneBefore(db, "", 1); return err },
		"Purge":       func() error { _, err := blobs.Purge(db, ""); return err },
		"History":     func() error { return testutil.ReadErr(t, blobs.History("", tipkv.Query{})) },
		"HistoryPage": func() error { _, _, err := blobs.HistoryPage("", tipkv.Query{}); return err },
	} {
		require.ErrorIs(t, f(), tipkv.ErrInvalid, name)
	}
	require.Empty(t, testutil.Collect(t, versioned.Collections(db)), "nothing was written")

	// A value that does not encode (issue 16): ErrInvalid, nothing written.
	funcs, err := versioned.NewCollection[func()](db, "funcs", nil)
	require.NoError(t, err)
	_, err = funcs.Put(db, "f", func() {})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Empty(t, testutil.Collect(t, versioned.Collections(db)))

	// A bad write inside an Update fails the Update only if its function
	// says so; the rest commits.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		_, err := blobs.Put(bt, "", []byte("x"))
		require.ErrorIs(t, err, tipkv.ErrInvalid)
		_, err = blobs.Put(bt, "ok", []byte("x"))
		return err
	}))
	require.Equal(t, []string{"ok"}, idsOf(testutil.Collect(t, blobs.LatestAll(tipkv.Query{}))))
}

// A value that encodes to the marker byte cannot be Put: it would read as
// a deletion.
func testValuesStartingWithTheMarkerByte(t *testing.T, b backend) {
	db := b.Open(t, nil)
	blobs, err := versioned.NewCollection[[]byte](db, "blobs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	expiring, err := versioned.NewCollection[[]byte](db, "expiring", &versioned.Options[[]byte]{Codec: codec.Raw{}, TTL: time.Hour, PurgeInterval: -1})
	require.NoError(t, err)
	for i, v := range [][]byte{{0xc1}, {0xc1, 0x00}, {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}, {0xc1, 0xc1}, {0xc0}, {}} {
		for _, c := range []*versioned.Collection[[]byte]{blobs, expiring} {
			id := fmt.Sprint("x", i)
			_, err := c.Put(db, id, v)
			require.NoError(t, err, "%x", v)
			d, err := c.Latest(id)
			require.NoError(t, err, "%x: a value, not a marker or a header", v)
			require.Equal(t, string(v), string(d.Value))
			h := testutil.Collect(t, c.History(id, tipkv.Query{}))
			require.Len(t, h, 1)
			require.False(t, h[0].Deleted)
		}
	}
	texts, err := versioned.NewCollection[string](db, "texts", &versioned.Options[string]{Codec: codec.String{}})
	require.NoError(t, err)
	_, err = texts.Put(db, "x", "\xc1")
	require.NoError(t, err)
	d, err := texts.Latest("x")
	require.NoError(t, err)
	require.Equal(t, "\xc1", d.Value)
}

func testFeedBadInput(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	_, err := f.Append(db, "", click{})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = f.Append(db, strings.Repeat("s", versioned.MaxNameSize+1), click{})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorIs(t, testutil.ReadErr(t, f.Newest("", tipkv.Query{})), tipkv.ErrInvalid)
	require.ErrorIs(t, f.Trim(db, "", 1), tipkv.ErrInvalid)
	require.ErrorIs(t, f.TrimBefore(db, "", t0), tipkv.ErrInvalid)
	_, err = versioned.NewFeed[click](nil, nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	raw, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	_, err = raw.Append(db, "big", make([]byte, versioned.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Empty(t, testutil.Collect(t, versioned.Streams(db)), "nothing was written")

	// Stream names are bytes too.
	p, err := raw.Append(db, "\x00\xff", []byte("x"))
	require.NoError(t, err)
	ev := testutil.Collect(t, raw.Newest("\x00\xff", tipkv.Query{}))
	require.Len(t, ev, 1)
	require.Equal(t, p, ev[0].Position)
	require.Equal(t, []byte("x"), ev[0].Value)

	// An event that does not decode.
	rawSet(t, db, feedKey("bad", 5), []byte{0xd9}) // a str 8 without its length
	err = testutil.ReadErr(t, f.Newest("bad", tipkv.Query{}))
	require.ErrorIs(t, err, tipkv.ErrCorrupt)
	require.ErrorContains(t, err, `stream "bad": position 5`)
}

func testBatchOfAnotherDBIsRefused(t *testing.T, b backend) {
	_, users := openPeople(t, b)
	other := b.Open(t, nil)
	feed, err := versioned.NewFeed[click](other, nil)
	require.NoError(t, err)
	otherFeed, err := versioned.NewFeed[click](b.Open(t, nil), nil)
	require.NoError(t, err)
	err = other.Update(func(bt *tipkv.Batch) error {
		_, err := users.Put(bt, "a", person{})
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	err = other.Update(func(bt *tipkv.Batch) error {
		_, err := otherFeed.Append(bt, "s", click{})
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	err = other.Update(func(bt *tipkv.Batch) error { return otherFeed.Trim(bt, "s", 0) })
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Empty(t, testutil.Collect(t, feed.Newest("s", tipkv.Query{})))
	require.Empty(t, testutil.Collect(t, users.History("a", tipkv.Query{})))
}

func testCallsAfterClose(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	f, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	putN(t, users, db, "a", 1)
	require.NoError(t, db.Close())
	for name, call := range map[string]func() error{
		"Put":         func() error { _, err := users.Put(db, "a", person{}); return err },
		"PutIf":       func() error { _, err := users.PutIf(db, "a", person{}, 1); return err },
		"Delete":      func() error { _, err := users.Delete(db, "a"); return err },
		"Prune":       func() error { _, err := users.Prune(db, "a", 1); return err },
		"Purge":       func() error { _, err := users.Purge(db, "a"); return err },
		"Latest":      func() error { _, err := users.Latest("a"); return err },
		"Get":         func() error { _, err := users.Get("a", 1); return err },
		"Count":       func() error { _, err := users.Count("a"); return err },
		"LatestMany":  func() error { _, err := users.LatestMany("a"); return err },
		"History":     func() error { return testutil.ReadErr(t, users.History("a", tipkv.Query{})) },
		"LatestAll":   func() error { return testutil.ReadErr(t, users.LatestAll(tipkv.Query{})) },
		"Collections": func() error { return testutil.ReadErr(t, versioned.Collections(db)) },
		"Streams":     func() error { return testutil.ReadErr(t, versioned.Streams(db)) },
		"Append":      func() error { _, err := f.Append(db, "s", click{}); return err },
		"Trim":        func() error { return f.Trim(db, "s", 0) },
		"Newest":      func() error { return testutil.ReadErr(t, f.Newest("s", tipkv.Query{})) },
	} {
		require.ErrorIs(t, call(), tipkv.ErrClosed, name)
	}
}

// Close while calls are in flight: an iteration open across Close ends
// with ErrClosed at its next step, an Update whose function is running
// fails to commit, and a write waiting for a document that Update holds
// wakes with ErrClosed; none hangs.
func testCloseDuringCalls(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	var stepErr error
	steps := 0
	for _, err := range users.History("a", tipkv.Query{}) {
		if err != nil {
			stepErr = err
			break
		}
		if steps++; steps == 1 {
			require.NoError(t, db.Close(), "Close inside the loop returns")
		}
	}
	require.ErrorIs(t, stepErr, tipkv.ErrClosed)

	db, users = openPeople(t, b)
	holding, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- db.Update(func(bt *tipkv.Batch) error {
			if _, err := users.Put(bt, "a", person{}); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	waiter := make(chan error, 1)
	go func() {
		_, err := users.Put(db, "a", person{})
		waiter <- err
	}()
	require.NoError(t, db.Close())
	select {
	case err := <-waiter:
		require.ErrorIs(t, err, tipkv.ErrClosed, "the waiting write")
	case <-time.After(time.Minute):
		t.Fatal("a write waiting for a held document did not wake when the DB closed")
	}
	close(release)
	require.ErrorIs(t, <-holder, tipkv.ErrClosed, "the holder's commit fails: the DB is closed")
}

// Inside an Update's function, a write on the DB commits on its own when
// it touches documents the Update does not hold, and fails at once, with
// an error that says to pass the Batch, when it touches one it holds:
// waiting would be for ever.
func testWriteOnTheDBInsideUpdate(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		if _, err := users.Put(bt, "held", person{}); err != nil {
			return err
		}
		require.NoError(t, feed.Trim(bt, "held", 1))

		v, err := users.Put(db, "free", person{Name: "alone"})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		d, err := users.Latest("free")
		require.NoError(t, err, "committed on its own, before the Update")
		require.Equal(t, "alone", d.Value.Name)
		require.NoError(t, db.Update(func(inner *tipkv.Batch) error {
			_, err := users.Put(inner, "free", person{})
			return err
		}), "a nested Update of other documents commits too")

		for name, write := range map[string]func() error{
			"Put":    func() error { _, err := users.Put(db, "held", person{}); return err },
			"PutIf":  func() error { _, err := users.PutIf(db, "held", person{}, 0); return err },
			"Delete": func() error { _, err := users.Delete(db, "held"); return err },
			"Prune":  func() error { _, err := users.Prune(db, "held", 1); return err },
			"Purge":  func() error { _, err := users.Purge(db, "held"); return err },
			"Trim":   func() error { return feed.Trim(db, "held", 0) },
			"nested Update": func() error {
				return db.Update(func(inner *tipkv.Batch) error {
					if _, err := users.Put(inner, "other", person{}); err != nil {
						return err
					}
					_, err := users.Put(inner, "held", person{})
					return err
				})
			},
		} {
			err := write()
			require.ErrorIs(t, err, tipkv.ErrInvalid, name)
			require.ErrorContains(t, err, "pass the *tipkv.Batch", name)
			require.False(t, errors.Is(err, tipkv.ErrConflict), name)
		}
		return nil
	}))
	require.Equal(t, []int64{1}, versionsOf(testutil.Collect(t, users.History("held", tipkv.Query{}))))
	require.Equal(t, testutil.Range(2, 1), versionsOf(testutil.Collect(t, users.History("free", tipkv.Query{}))))
	require.Empty(t, testutil.Collect(t, users.History("other", tipkv.Query{})), "the refused nested Update wrote nothing")
}
