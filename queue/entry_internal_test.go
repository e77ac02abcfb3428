package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// entryAt finds entries by seq in order, which has gaps (aborted
// enqueues, messages consumed ahead of older ones): by the guess from the
// first seq when it hits, else by binary search; removed and unknown
// seqs are nil.
func TestEntryAt(t *testing.T) {
	c := &core{ready: itemHeap{less: bySeq}, timers: itemHeap{less: byDeadline}}
	require.Nil(t, c.entryAt(1))
	es := map[int64]*entry{}
	for _, seq := range []int64{3, 4, 7, 8, 9, 20} {
		e := &entry{seq: seq}
		es[seq] = e
		c.addEntry(e)
	}
	for seq := int64(0); seq < 25; seq++ {
		require.Same(t, es[seq], c.entryAt(seq), "seq %d", seq)
	}
	require.Equal(t, 6, c.live())
	c.remove(es[8])
	c.remove(es[3]) // the first: order now starts at 4
	require.Nil(t, c.entryAt(8))
	require.Nil(t, c.entryAt(3))
	for _, seq := range []int64{4, 7, 9, 20} {
		require.Same(t, es[seq], c.entryAt(seq), "seq %d", seq)
	}
	require.Equal(t, 4, c.live())
	require.Equal(t, int64(4), c.head())
	c.setState(es[4], stLeased, time.Unix(1, 0))
	c.remove(es[4])
	require.Nil(t, c.entryAt(4))
	require.Same(t, es[7], c.entryAt(7))
	require.Equal(t, 3, c.live())
}
