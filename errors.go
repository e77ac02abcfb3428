package tipkv

import (
	"errors"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/storage"
)

// The errors tipkv returns, wrapped with the key, id or name that failed:
// test for them with errors.Is.
var (
	// ErrNotFound is returned when a document, version or message does not
	// exist.
	ErrNotFound = storage.ErrNotFound

	// ErrConflict is returned by conditional writes (PutIf) when the current
	// state is not the one the caller expected.
	ErrConflict = errors.New("tipkv: conflict")

	// ErrClosed is returned by every call on a DB after Close has begun, and
	// by calls on handles of a closed DB.
	ErrClosed = storage.ErrClosed

	// ErrCorrupt is returned when stored bytes do not decode: a key tipkv did
	// not write, or a value that is not a valid encoding of the requested
	// type. The message names the key.
	ErrCorrupt = codec.ErrCorrupt

	// ErrInvalid is returned for bad input: an empty id or name, an id or
	// value over its limit, a version out of range, a bad query or cursor.
	// Nothing is written.
	ErrInvalid = errors.New("tipkv: invalid argument")

	// ErrFormat is returned by Open when the directory is not a tipkv store,
	// or holds a store of a newer format than this version reads. Open
	// changes nothing in that case.
	ErrFormat = errors.New("tipkv: unsupported store")

	// ErrLocked is returned by Open when the store is already open, in
	// another process or in this one: Pebble locks the directory.
	ErrLocked = errors.New("tipkv: store is locked")
)
