package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// watchCases are the tests of Collection.Watch and of retention.
func watchCases() []testCase {
	return []testCase{
		{"WatchDeliversEveryVersionOnceInOrder", checked(testWatchConcurrentPuts)},
		{"WatchShowsDeletePruneAndPurge", checked(testWatchShowsDeletePruneAndPurge)},
		{"WatchStartsAfterAndSkipsWhatWasPruned", checked(testWatchStartsAfter)},
		{"WatchEndsOnContextAndClose", checked(testWatchEnds)},
		{"KeepVersions", checked(testKeepVersions)},
	}
}

// change is a Change as the tests compare it.
type change struct {
	kind    versioned.ChangeKind
	v       int64 // the version, or for a prune the oldest kept
	name    string
	deleted bool
}

func (c change) String() string { return fmt.Sprintf("%v %d %q", c.kind, c.v, c.name) }

func changeOf(ch versioned.Change[person]) change {
	switch ch.Kind {
	case versioned.ChangePrune:
		return change{kind: ch.Kind, v: ch.Oldest}
	case versioned.ChangePurge:
		return change{kind: ch.Kind}
	}
	return change{kind: ch.Kind, v: ch.Doc.Version, name: ch.Doc.Value.Name, deleted: ch.Doc.Deleted}
}

// puller pulls a Watch one change at a time.
type puller struct {
	t      testing.TB
	next   func() (versioned.Change[person], error, bool)
	stop   func()
	cancel context.CancelFunc
}

func pull(t testing.TB, seq iter.Seq2[versioned.Change[person], error], cancel context.CancelFunc) *puller {
	next, stop := iter.Pull2(seq)
	p := &puller{t: t, next: next, stop: stop, cancel: cancel}
	t.Cleanup(p.close)
	return p
}

func (p *puller) close() {
	p.cancel()
	p.stop()
}

// expect pulls len(want) changes and compares them with want.
func (p *puller) expect(want ...change) {
	p.t.Helper()
	var got []change
	for range want {
		ch, err, ok := p.next()
		require.True(p.t, ok, "the watch ended after %v", got)
		require.NoError(p.t, err)
		got = append(got, changeOf(ch))
	}
	require.Equal(p.t, want, got)
}

func put(v int64, name string) change {
	return change{kind: versioned.ChangePut, v: v, name: name}
}

// Versions written by concurrent writers (and, on a shared engine, by
// another process) reach a watcher each once, in version order, with the
// values History reads.
func testWatchConcurrentPuts(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	type writer struct {
		c *versioned.Collection[person]
		w tipkv.Writer
	}
	writers := []writer{{users, db}, {users, db}, {users, db}}
	if b.Second != nil {
		db2 := b.Second(t, db, nil)
		writers = append(writers, writer{people(t, db2), db2})
	}
	n := b.N(300)
	total := int64(n * len(writers))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Some versions are written before the watch starts.
	putN(t, users, db, "w", 5)
	var got []versioned.Change[person]
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for ch, err := range users.Watch(ctx, "w", 0) {
			if err != nil {
				done <- err
				return
			}
			got = append(got, ch)
			if int64(len(got)) == total+5 {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for i, wr := range writers {
		spawn(&wg, func() {
			for j := range n {
				if _, err := wr.c.Put(wr.w, "w", person{Name: fmt.Sprintf("%d-%d", i, j)}); err != nil {
					t.Error(err)
					cancel() // the watch waits for every version: end it
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, <-done)
	hist := requireDense(t, users, "w")
	require.Len(t, got, int(total+5))
	for i, ch := range got {
		require.Equal(t, versioned.ChangePut, ch.Kind)
		require.Equal(t, int64(i+1), ch.Doc.Version, "delivered in version order, each once")
		require.Equal(t, hist[len(hist)-1-i].Value, ch.Doc.Value)
	}
}

// A Delete arrives as its delete marker, a Prune with the oldest version
// kept, a Purge as a purge after which versions start again at 1.
func testWatchShowsDeletePruneAndPurge(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	p := pull(t, users.Watch(ctx, "d", 0), cancel)
	for i := range 3 {
		_, err := users.Put(db, "d", person{Name: fmt.Sprint(i + 1)})
		require.NoError(t, err)
	}
	p.expect(put(1, "1"), put(2, "2"), put(3, "3"))
	v, err := users.Delete(db, "d")
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
	p.expect(change{kind: versioned.ChangeDelete, v: 4, deleted: true})
	_, err = users.Put(db, "d", person{Name: "5"})
	require.NoError(t, err)
	p.expect(put(5, "5"))
	dropped, err := users.Prune(db, "d", 2)
	require.NoError(t, err)
	require.Equal(t, int64(3), dropped)
	p.expect(change{kind: versioned.ChangePrune, v: 4})
	_, err = users.PruneBefore(db, "d", 5)
	require.NoError(t, err)
	p.expect(change{kind: versioned.ChangePrune, v: 5})
	_, err = users.Purge(db, "d")
	require.NoError(t, err)
	p.expect(change{kind: versioned.ChangePurge})
	_, err = users.Put(db, "d", person{Name: "again"})
	require.NoError(t, err)
	p.expect(put(1, "again"))

	// A Purge followed by as many Puts as there were versions, before the
	// watcher reads: the values differ, so it is still a purge.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		if _, err := users.Purge(bt, "d"); err != nil {
			return err
		}
		_, err := users.Put(bt, "d", person{Name: "other"})
		return err
	}))
	p.expect(change{kind: versioned.ChangePurge}, put(1, "other"))
}

// Watch starts after the version it is given; versions pruned before it
// read them are reported as a prune, and the watch goes on from the
// oldest kept. A watch after a version the document no longer has (it was
// purged and is shorter now) starts with a purge.
func testWatchStartsAfter(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	for v := range 6 {
		_, err := users.Put(db, "a", person{Name: fmt.Sprint(v + 1)})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := pull(t, users.Watch(ctx, "a", 4), cancel)
	p.expect(put(5, "5"), put(6, "6"))

	_, err := users.Prune(db, "a", 2)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	p2 := pull(t, users.Watch(ctx2, "a", 1), cancel2)
	p2.expect(change{kind: versioned.ChangePrune, v: 5}, put(5, "5"), put(6, "6"))
	p.expect(change{kind: versioned.ChangePrune, v: 5})

	ctx3, cancel3 := context.WithCancel(context.Background())
	p3 := pull(t, users.Watch(ctx3, "a", 9), cancel3)
	p3.expect(change{kind: versioned.ChangePurge}, change{kind: versioned.ChangePrune, v: 5}, put(5, "5"), put(6, "6"))

	// A document that does not exist yet: the first Put arrives.
	ctx4, cancel4 := context.WithCancel(context.Background())
	p4 := pull(t, users.Watch(ctx4, "new", 0), cancel4)
	_, err = users.Put(db, "new", person{Name: "n"})
	require.NoError(t, err)
	p4.expect(put(1, "n"))

	for _, bad := range []struct {
		id    string
		after int64
	}{{"", 0}, {"a", -1}} {
		err := testutil.ReadErr(t, users.Watch(context.Background(), bad.id, bad.after))
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
}

// A Watch ends with ctx.Err() when its context ends and with ErrClosed when
// the DB closes, while it sleeps.
func testWatchEnds(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "e", 1)
	ends := make(chan error, 2)
	watch := func(ctx context.Context) {
		n := 0
		for _, err := range users.Watch(ctx, "e", 0) {
			if err != nil {
				ends <- err
				return
			}
			if n++; n == 1 {
				ends <- nil // delivered: it sleeps next
			}
		}
		ends <- errors.New("the watch ended without an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go watch(ctx)
	require.NoError(t, <-ends)
	cancel()
	require.ErrorIs(t, <-ends, context.Canceled)

	go watch(context.Background())
	require.NoError(t, <-ends)
	require.NoError(t, db.Close())
	require.ErrorIs(t, <-ends, tipkv.ErrClosed)

	// A Watch on a closed DB ends at once.
	require.ErrorIs(t, testutil.ReadErr(t, users.Watch(context.Background(), "e", 0)), tipkv.ErrClosed)
}
