package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/link"
)

// On a shared engine the first delivery of a queue creates its control
// key, so that later deliveries require it equal rather than absent (on
// PostgreSQL an absent key's condition is a row each delivery inserts,
// which every other delivery of the queue waits for), and each process
// then trusts its hint: a Receive reads nothing for the control key.
func TestSharedDeliveryCreatesControl(t *testing.T) {
	dbs := openShared(t, 2)
	q, err := Open[int](dbs[0], "q", nil)
	require.NoError(t, err)
	_, err = q.Enqueue(dbs[0], 1, 2, 3)
	require.NoError(t, err)
	s, err := link.StoreOf(dbs[0])
	require.NoError(t, err)
	_, err = s.Get(q.c.k.control)
	require.Error(t, err, "no control key before a delivery")

	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	v, err := s.Get(q.c.k.control)
	require.NoError(t, err, "the first delivery created the control key")
	ct, err := parseControl(v)
	require.NoError(t, err)
	require.Equal(t, control{}, ct)
	q.c.mu.Lock()
	require.True(t, q.c.sm.ctlKnown)
	require.Equal(t, v, q.c.sm.ctlRaw, "the process keeps what it wrote as its hint")
	q.c.mu.Unlock()

	// Another process, whose hint says nothing yet, reads the key once.
	b, err := Open[int](dbs[1], "q", nil)
	require.NoError(t, err)
	ms, err = b.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	b.c.mu.Lock()
	require.Equal(t, v, b.c.sm.ctlRaw)
	b.c.mu.Unlock()
}
