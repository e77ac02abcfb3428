package tipkv

import (
	"fmt"
	"testing"
)

// The marker file is read from disk before anything else: any bytes in it
// give a format number or an error, never a panic.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte("tipkv store format 1\n"))
	f.Add([]byte("tipkv store format 99"))
	f.Add([]byte("tipkv store format -1"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _, err := parseMarker(data)
		if err == nil && v < 1 {
			t.Fatalf("parseMarker(%q) = %d without error", data, v)
		}
		if err == nil {
			if got, _, err := parseMarker(fmt.Appendf(nil, "%s%d\n", markerPrefix, v)); err != nil || got != v {
				t.Fatalf("format %d does not round trip: %d %v", v, got, err)
			}
		}
	})
}
