package versioned_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

func filteredUsers(t testing.TB, db *tipkv.DB) *versioned.Collection[user] {
	t.Helper()
	c, err := versioned.NewCollection(db, "users", &versioned.Options[user]{MissFilter: true})
	require.NoError(t, err)
	return c
}

// requireAll checks that every id reads as present through every point
// read the filter answers.
func requireAll(t *testing.T, c *versioned.Collection[user], ids []string) {
	t.Helper()
	for _, id := range ids {
		d, err := c.Latest(id)
		require.NoError(t, err, id)
		_, err = c.Get(id, d.Version)
		require.NoError(t, err, id)
		_, err = c.AsOf(id, d.Version)
		require.NoError(t, err, id)
		n, err := c.Count(id)
		require.NoError(t, err, id)
		require.NotZero(t, n, id)
	}
	docs, err := c.LatestMany(ids...)
	require.NoError(t, err)
	for i, d := range docs {
		require.Equal(t, ids[i], d.ID)
	}
}

// A missing document is answered by the filter without a seek; present
// ones, written before the DB was reopened and after, are found.
func TestMissFilterAnswersMissesWithoutSeeking(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(filepath.Join(dir, "db"), &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	users := newUsers(t, db)
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("old-%03d", i))
		putN(t, users, db, ids[i], 1+i%3)
	}
	require.NoError(t, db.Close())
	db, err = tipkv.Open(filepath.Join(dir, "db"), &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	users = filteredUsers(t, db)
	require.NotZero(t, versioned.FilterCap(users))
	for i := range 100 {
		ids = append(ids, fmt.Sprintf("new-%03d", i))
		putN(t, users, db, ids[len(ids)-1], 1)
	}
	requireAll(t, users, ids)

	var c seekCounter
	defer versioned.WrapIters(c.wrap)()
	missed := 0
	for i := range 1000 {
		id := fmt.Sprintf("missing-%04d", i)
		_, err := users.Latest(id)
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		_, err = users.AsOf(id, 3)
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		_, err = users.Get(id, 1)
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		n, err := users.Count(id)
		require.NoError(t, err)
		require.Zero(t, n)
		if c.seeks.Load() > 0 {
			missed++
			c.seeks.Store(0)
		}
	}
	// About 1% of misses are a "maybe" at 10-20 bits per document.
	require.Less(t, missed, 50, "misses that reached the store")
}

// Without the option, a handle's writes still keep the filter another
// handle of the DB asked for, and reads through it are exact.
func TestMissFilterKeptByEveryHandle(t *testing.T) {
	db := testutil.OpenMem(t)
	plain := newUsers(t, db)
	filtered := filteredUsers(t, db)
	var ids []string
	for i := range 200 {
		ids = append(ids, fmt.Sprintf("d%03d", i))
		putN(t, plain, db, ids[i], 1)
	}
	requireAll(t, filtered, ids)
	requireAll(t, plain, ids)
	// A delete and a purge: Latest says not found, the history is right.
	_, err := plain.Delete(db, "d000")
	require.NoError(t, err)
	_, err = filtered.Latest("d000")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	_, err = plain.Purge(db, "d001")
	require.NoError(t, err)
	_, err = filtered.Latest("d001")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	putN(t, plain, db, "d001", 1)
	d, err := filtered.Latest("d001")
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Version)
}

// A document written while the filter is built is found: one written by
// an Update that holds it when the build starts (its write came before
// there was any filter), and ones written while the build walks.
func TestMissFilterBuildMissesNoWrite(t *testing.T) {
	db := testutil.OpenMem(t)
	users := newUsers(t, db)
	for i := range 50 {
		putN(t, users, db, fmt.Sprintf("before-%02d", i), 1)
	}
	var during []string
	late, locked, release := make(chan error), make(chan struct{}), make(chan struct{})
	restore := versioned.OnFilterWalk(func() {
		// Other goroutines write while the build is about to walk.
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			id := fmt.Sprintf("during-%d", g)
			during = append(during, id)
			go func() {
				defer wg.Done()
				_, err := users.Put(db, id, user{Name: id})
				require.NoError(t, err)
			}()
		}
		wg.Wait()
		// And one that takes its document now but applies only after the
		// build has ended: it reaches the filter through the pending list.
		go func() {
			late <- db.Update(func(b *tipkv.Batch) error {
				_, err := users.Put(b, "late", user{Name: "late"})
				locked <- struct{}{}
				<-release
				return err
			})
		}()
		<-locked
	})
	var filtered *versioned.Collection[user]
	err := db.Update(func(b *tipkv.Batch) error {
		if _, err := users.Put(b, "held", user{Name: "held"}); err != nil {
			return err
		}
		// The Update holds "held", not yet applied: the build walks
		// without it, and must take it from the lock.
		var err error
		filtered, err = versioned.NewCollection(db, "users", &versioned.Options[user]{MissFilter: true})
		return err
	})
	restore()
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-late)
	ids := append([]string{"held", "late"}, during...)
	for i := range 50 {
		ids = append(ids, fmt.Sprintf("before-%02d", i))
	}
	requireAll(t, filtered, ids)
}

// Writes that outgrow the filter's capacity grow it in the background;
// every document stays found throughout.
func TestMissFilterGrows(t *testing.T) {
	db := testutil.OpenMem(t)
	users := filteredUsers(t, db)
	cap0 := versioned.FilterCap(users)
	grown := make(chan struct{}, 8)
	defer versioned.OnFilterGrown(func() { grown <- struct{}{} })()
	var ids []string
	for i := 0; i < int(cap0)+100; i++ {
		ids = append(ids, fmt.Sprintf("doc-%06d", i))
		_, err := users.Put(db, ids[i], user{Age: i})
		require.NoError(t, err)
		if i%1000 == 0 {
			requireAll(t, users, ids[max(0, i-50):])
		}
	}
	<-grown
	require.Greater(t, versioned.FilterCap(users), cap0)
	requireAll(t, users, ids)
}

// On a shared engine another process creates documents this DB never
// sees: the option does nothing, and a read finds them.
func TestMissFilterOffOnSharedEngine(t *testing.T) {
	dbs := testutil.OpenShared(t, 2, sharedstore.Options{}, nil)
	a := filteredUsers(t, dbs[0])
	require.Zero(t, versioned.FilterCap(a))
	b := newUsers(t, dbs[1])
	_, err := a.Latest("x")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	_, err = b.Put(dbs[1], "x", user{Name: "x"})
	require.NoError(t, err)
	d, err := a.Latest("x")
	require.NoError(t, err)
	require.Equal(t, "x", d.Value.Name)
	docs, err := a.LatestMany("x")
	require.NoError(t, err)
	require.Equal(t, int64(1), docs[0].Version)
}

// A Snapshot read does not consult the filter: a snapshot taken before a
// purge still holds the document the filter, built after the purge, never
// saw.
func TestMissFilterNotForSnapshots(t *testing.T) {
	db := testutil.OpenMem(t)
	users := newUsers(t, db)
	putN(t, users, db, "gone", 2)
	err := db.View(func(s *tipkv.Snapshot) error {
		_, err := users.Purge(db, "gone")
		require.NoError(t, err)
		filtered := filteredUsers(t, db)
		_, err = filtered.Latest("gone")
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		d, err := filtered.In(s).Latest("gone")
		require.NoError(t, err)
		require.Equal(t, int64(2), d.Version)
		return nil
	})
	require.NoError(t, err)
}
