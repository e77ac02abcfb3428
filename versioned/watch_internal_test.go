package versioned

import (
	"context"
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/testutil"
)

// A wake-up of Watch that reads from a floor (watchFloor) delivers what a
// read of the document's whole range delivers from the same state, also
// when versions appear below the floor or none is left at or above it:
// each case reads the document until the watcher has delivered all, makes
// a change, and reads again, once from the floor and once over the whole
// range (knobs.Versioned.WatchWholeRange).
func TestWatchFloorReadsAsWholeRange(t *testing.T) {
	puts := func(n int) func(w tipkv.Writer, c *Collection[[]byte]) error {
		return func(w tipkv.Writer, c *Collection[[]byte]) error {
			for range n {
				if _, err := c.Put(w, "doc", []byte("v")); err != nil {
					return err
				}
			}
			return nil
		}
	}
	purgeAnd := func(n int) func(w tipkv.Writer, c *Collection[[]byte]) error {
		return func(w tipkv.Writer, c *Collection[[]byte]) error {
			if _, err := c.Purge(w, "doc"); err != nil {
				return err
			}
			return puts(n)(w, c)
		}
	}
	for _, tc := range []struct {
		name   string
		keep   int // of the handle that watches and writes
		before int // versions written by a handle without KeepVersions; 0: 10 by the watcher's, the 3 newest kept, which it reads before the change (its floor is then 8)
		change func(w tipkv.Writer, c *Collection[[]byte]) error
		want   string
	}{
		{"puts past KeepVersions", 3, 0, puts(5), "[prune 13 put 13 put 14 put 15]"},
		{"a Prune above the floor", 0, 0, func(w tipkv.Writer, c *Collection[[]byte]) error {
			_, err := c.Prune(w, "doc", 2)
			return err
		}, "[prune 9]"},
		{"a Purge and more versions", 3, 0, purgeAnd(12), "[purge 0 prune 10 put 10 put 11 put 12]"},
		{"a Purge and as many versions", 0, 0, purgeAnd(10), "[purge 0 put 1 put 2 put 3 put 4 put 5 put 6 put 7 put 8 put 9 put 10]"},
		{"a Purge and fewer versions", 0, 0, purgeAnd(3), "[purge 0 put 1 put 2 put 3]"},
		{"a Purge alone", 0, 0, purgeAnd(0), "[purge 0]"},
		{"versions below latest-KeepVersions+1", 3, 20, puts(0), "[put 1 put 2 put 3 put 4 put 5 put 6 put 7 put 8 put 9 put 10 put 11 put 12 put 13 put 14 put 15 put 16 put 17 put 18 put 19 put 20]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i, whole := range []bool{false, true} {
				func() {
					defer knobs.Set(&knobs.Versioned.WatchWholeRange, whole)()
					db := testutil.OpenMem(t)
					c, err := NewCollection(db, "docs", &Options[[]byte]{Codec: codec.Raw{}, KeepVersions: tc.keep})
					require.NoError(t, err)
					all, err := NewCollection(db, "docs", &Options[[]byte]{Codec: codec.Raw{}})
					require.NoError(t, err)
					require.NoError(t, puts(tc.before)(db, all))
					if tc.before == 0 {
						require.NoError(t, puts(10)(db, c))
						_, err := c.Prune(db, "doc", 3)
						require.NoError(t, err)
					}
					prefix := c.docPrefix(nil, "doc")
					e, err := c.w.watch(context.Background(), prefix)
					require.NoError(t, err)
					defer c.w.unwatch(e)
					st := watchState{next: 1, seed: maphash.MakeSeed()}
					read := func() []string {
						var out []string
						for more := true; more; {
							var changes []Change[[]byte]
							changes, more, err = c.watchRead("doc", prefix, numberKey(prefix, 0), e, &st)
							require.NoError(t, err)
							for _, ch := range changes {
								out = append(out, fmt.Sprint(ch.Kind, " ", ch.Doc.Version+ch.Oldest))
							}
						}
						return out
					}
					if tc.before == 0 {
						read()
					}
					require.NoError(t, db.Update(func(b *tipkv.Batch) error { return tc.change(b, c) }))
					got[i] = fmt.Sprint(read())
				}()
			}
			require.Equal(t, tc.want, got[1], "the whole range")
			require.Equal(t, got[1], got[0], "from the floor")
		})
	}
}
