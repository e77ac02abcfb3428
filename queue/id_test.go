package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

func TestIDText(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	push(t, db, q, 1)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	id := ms[0].ID
	require.Equal(t, int64(1), id.Seq())

	back, err := queue.ParseID(id.String())
	require.NoError(t, err)
	require.Equal(t, id, back)

	data, err := json.Marshal(map[string]queue.ID{"id": id})
	require.NoError(t, err)
	var m map[string]queue.ID
	require.NoError(t, json.Unmarshal(data, &m))
	require.NoError(t, q.Ack(db, m["id"]), "an ID read back from text acks")

	require.Equal(t, "0.0", queue.ID{}.String())
	for _, bad := range []string{"", ".", "1", "1.", ".1", "01.1", "1.01", "-1.1", "+1.1", "1.-1", "1.1.1", " 1.1",
		"1.1 ", "1e3.1", "4611686018427387904.1", "1.18446744073709551616", "99999999999999999999999999.1"} {
		_, err := queue.ParseID(bad)
		require.ErrorIs(t, err, tipkv.ErrInvalid, "%q", bad)
	}
}

// ParseID accepts exactly the canonical text of some ID: whatever it
// accepts prints back to the same text, and it never panics.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0.0", "1.1", "42.7", "4611686018427387903.18446744073709551615", "01.1", "1.", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := queue.ParseID(s)
		if err != nil {
			require.ErrorIs(t, err, tipkv.ErrInvalid)
			require.LessOrEqual(t, len(err.Error()), 400, "the error quotes a bounded part of the input")
			return
		}
		require.Equal(t, s, id.String())
		var back queue.ID
		require.NoError(t, back.UnmarshalText([]byte(s)))
		require.Equal(t, id, back)
	})
}
