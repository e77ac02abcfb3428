package pebblestore

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// onStoreCall tells the store's own frames by pkgPath: the name of a
// method's frame must start with it, wherever the package lives.
func TestPkgPathMatchesTheStoresFrames(t *testing.T) {
	fn := runtime.FuncForPC(reflect.ValueOf((*Store).Caps).Pointer())
	if fn == nil || !strings.HasPrefix(fn.Name(), pkgPath+".") {
		t.Fatalf("frame %v does not start with pkgPath %q", fn.Name(), pkgPath)
	}
}
