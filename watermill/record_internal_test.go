package tipkvwatermill

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

// The worked example of the record's doc comment, byte for byte: a
// failing test means the stored format changed, which breaks every topic
// already written.
func TestRecordGolden(t *testing.T) {
	m := message.NewMessage("id-1", []byte("hi"))
	m.Metadata.Set("k", "v")
	b := appendRecord(nil, m)
	require.Equal(t, "010469642d3101016b017668 69", hex.EncodeToString(b[:12])+" "+hex.EncodeToString(b[12:]))
	r, err := decodeRecord(b)
	require.NoError(t, err)
	require.Equal(t, record{uuid: "id-1", metadata: message.Metadata{"k": "v"}, payload: []byte("hi")}, r)

	empty := appendRecord(nil, message.NewMessage("", nil))
	require.Equal(t, "010000", hex.EncodeToString(empty))
	r, err = decodeRecord(empty)
	require.NoError(t, err)
	require.Equal(t, record{payload: []byte{}}, r)
}

// Every record decodes to what was encoded; any other bytes either decode
// to something that encodes back to them or fail with ErrCorrupt, never a
// panic.
func FuzzDecodeRecord(f *testing.F) {
	m := message.NewMessage("id-1", []byte("hi"))
	m.Metadata.Set("k", "v")
	f.Add(appendRecord(nil, m))
	f.Add([]byte{0x01, 0x00, 0x00})
	f.Add([]byte{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{0x01, 0x00, 0x05, 0x01, 0x61})
	f.Add([]byte{0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, tipkv.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		again := message.NewMessage(r.uuid, r.payload)
		for k, v := range r.metadata {
			again.Metadata[k] = v
		}
		r2, err := decodeRecord(appendRecord(nil, again))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		require.Equal(t, r.uuid, r2.uuid)
		require.Equal(t, len(r.metadata), len(r2.metadata))
		require.Equal(t, string(r.payload), string(r2.payload))
	})
}
