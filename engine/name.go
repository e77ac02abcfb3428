package engine

import (
	"path"
	"reflect"
	"strings"
)

// EngineName returns a short name for the engine s: the name of the
// package that implements it without "store" or "kv" ("pebble" for
// pebblestore, "etcd" for etcdkv, "sql" for sqlkv).
func EngineName(s any) string {
	t := reflect.TypeOf(s)
	if t == nil {
		return "none"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "" {
		return t.String()
	}
	name := path.Base(t.PkgPath())
	for _, suffix := range []string{"store", "kv"} {
		if n := strings.TrimSuffix(name, suffix); n != "" {
			name = n
		}
	}
	return name
}
