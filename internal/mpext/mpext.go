// Package mpext reads msgpack extension values, for the two places that
// render stored msgpack as JSON without knowing its Go type (the tipkv
// command and the web console).
package mpext

import "github.com/vmihailenco/msgpack/v5/msgpcode"

// Split returns the type id and the data of raw, one whole extension
// value (its first byte one of the fixext or ext codes).
func Split(raw []byte) (id int8, data []byte) {
	switch raw[0] {
	case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16:
		return int8(raw[1]), raw[2:]
	case msgpcode.Ext8:
		return int8(raw[2]), raw[3:]
	case msgpcode.Ext16:
		return int8(raw[3]), raw[4:]
	default: // Ext32
		return int8(raw[5]), raw[6:]
	}
}
