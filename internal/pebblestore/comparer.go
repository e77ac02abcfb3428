package pebblestore

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tipkv/tipkv/codec"
)

// ComparerName is persisted in every store Pebble writes. It is chosen once
// and never changes: a store written with another comparer will not open.
const ComparerName = "tipkv.v1"

// Comparer orders keys bytewise and splits numbered keys (codec.Split) into a
// prefix, used by bloom filters and prefix seeks, and an 8-byte suffix.
//
// Because every suffix has the same length and codec segments are
// terminated, comparing prefixes first and suffixes second is the same as
// comparing the whole keys bytewise, so Compare is bytes.Compare.
var Comparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer // AbbreviatedKey: bytewise
	c.Name = ComparerName
	c.Compare = bytes.Compare
	c.Equal = bytes.Equal
	c.Split = codec.Split
	c.ImmediateSuccessor = codec.ImmediateSuccessor
	c.ComparePointSuffixes = bytes.Compare
	c.CompareRangeSuffixes = bytes.Compare
	// Index separators are real keys, never shortened ones, so every key
	// Pebble hands to Split has tipkv's shape. It costs some index space.
	c.Separator = func(dst, a, _ []byte) []byte { return append(dst, a...) }
	c.Successor = func(dst, a []byte) []byte { return append(dst, a...) }
	return &c
}()
