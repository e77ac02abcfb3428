package pebblestore

import (
	"testing"
)

// The marker file is read from disk before anything else: any bytes in it
// give a format number or an error, never a panic, and what is written
// reads back.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte("tipkv store format 1\n"))
	f.Add([]byte("tipkv store format 2 creating\n"))
	f.Add([]byte("tipkv store format 99"))
	f.Add([]byte("tipkv store format -1"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, creating, err := ParseMarker(data)
		if err == nil && v < 1 {
			t.Fatalf("ParseMarker(%q) = %d without error", data, v)
		}
		if err == nil {
			got, gotCreating, err := ParseMarker(AppendMarker(nil, v, creating))
			if err != nil || got != v || gotCreating != creating {
				t.Fatalf("format %d creating %v does not round trip: %d %v %v", v, creating, got, gotCreating, err)
			}
		}
	})
}
