package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/vmihailenco/msgpack/v5"
)

// A type shared with an HTTP API: json tags, no msgpack tags.
type apiEvent struct {
	UserID string `json:"user_id"`
}

// openFormat1 returns a DB on a store created at format 1, when the
// default codec named struct fields by their Go names.
func openFormat1(t *testing.T) *tipkv.DB {
	t.Helper()
	s, err := pebblestore.Open("format1", pebblestore.Config{InMemory: true, CacheSize: 8 << 20, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	b := s.NewBatch()
	require.NoError(t, b.Set(codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "format"), []byte("1")))
	require.NoError(t, b.Apply(false))
	require.NoError(t, b.Close())
	db, err := tipkv.OpenEngine(s, "format1", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// The default codec names fields as the store does: by json tag on a
// store created now, by Go name on one created at format 1 (whose stored
// messages would otherwise read back empty).
func TestDefaultCodecFollowsTheStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   *tipkv.DB
		key  string
	}{
		{"new store", testutil.OpenMem(t), "user_id"},
		{"format 1 store", openFormat1(t), "UserID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := openQ[apiEvent](t, tc.db, "events", nil)
			push(t, tc.db, q, apiEvent{UserID: "u1"})
			s, err := link.StoreOf(tc.db)
			require.NoError(t, err)
			v, err := s.Get(codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "events"), 1))
			require.NoError(t, err)
			_, payload, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, msgpack.Unmarshal(payload, &m))
			require.Equal(t, map[string]any{tc.key: "u1"}, m)

			ms, err := q.Receive(1, time.Minute)
			require.NoError(t, err)
			require.Equal(t, "u1", ms[0].Value.UserID)
		})
	}
}
