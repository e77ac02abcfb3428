// Package docfmt holds the one detail of the document value format that
// tools must know besides the codec: the delete marker. Package versioned
// writes it and cmd/tipkv reads it; nothing else may depend on it.
//
// A version's stored value is the document encoded by the collection's
// codec, except for a delete marker: the single byte DeleteMarker, written
// by Collection.Delete as the next version of the document. 0xC1 is the one
// byte msgpack never produces ("never used"), and no JSON or UTF-8 text
// starts with it, so no value of the usual codecs is a marker; Put refuses
// a value whose encoding is exactly that byte (possible with raw or string
// codecs).
package docfmt

// DeleteMarker is the whole stored value of a delete marker.
const DeleteMarker byte = 0xC1

// IsDeleteMarker reports whether v, a stored version value, is a delete
// marker.
func IsDeleteMarker(v []byte) bool { return len(v) == 1 && v[0] == DeleteMarker }
