package proctest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// inFlight follows each reporter by the last word of its lines, in the
// formats the children print: a write is in flight from its PUTTING or
// RECV line until its outcome, whatever the other children report
// meanwhile.
func TestInFlightFollowsEachReporter(t *testing.T) {
	r := newReports()
	r.add("UP producer-0.1")
	r.add("UP consumer-0.1")
	require.False(t, r.inFlight("producer-0.1"))

	r.add("PUTTING producer-0.1:0 d0 producer-0.1")
	r.add("RECV producer-1.1:0/0 3 10 20 consumer-0.1")
	r.add("PUT-OK producer-1.1:0 d1 4 101 producer-1.1")
	require.True(t, r.inFlight("producer-0.1"), "an Update sent and not answered")
	require.True(t, r.inFlight("consumer-0.1"), "messages received and not acknowledged")
	require.False(t, r.inFlight("producer-1.1"))

	r.add("PUT-UNK producer-0.1:0 d0 0 0 producer-0.1")
	r.add("ACK-OK 1 consumer-0.1")
	require.False(t, r.inFlight("producer-0.1"))
	require.False(t, r.inFlight("consumer-0.1"))
	require.Equal(t, map[string]int{"producer-1": 1, "consumer-0": 1}, r.byRole)
	require.Equal(t, 1, r.acked())
}
