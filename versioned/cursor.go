package versioned

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/tipkv/tipkv"
)

// A cursor is URL-safe base64 (no padding) of
//
//	format  1 byte   cursorFormat
//	kind    1 byte   'h' a document's history, 'a' LatestAll, 'f' a feed
//	payload          'h', 'f': the version or position of the last item
//	                 read, 8 bytes big-endian; 'a': the id of the last
//	                 document read, raw bytes
//	check   4 bytes  CRC-32C (Castagnoli), big-endian, of the read's key
//	                 prefix followed by format, kind and payload
//
// The key prefix in the checksum (collection and id, collection, or stream)
// ties a cursor to the read that made it without storing the prefix: a
// cursor handed to another document, collection or stream fails its check.
// It is not a signature; a client that forges a cursor can only start a
// read at a point of its choosing in a range it could read anyway.
const (
	cursorFormat = 1

	kindHistory = 'h'
	kindAll     = 'a'
	kindFeed    = 'f'

	cursorCheckSize = 4
)

// maxCursorLen is the longest cursor string parseCursor accepts: an id of
// MaxIDSize bytes with its header and check.
var maxCursorLen = base64.RawURLEncoding.EncodedLen(2 + MaxIDSize + cursorCheckSize)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func makeCursor(kind byte, scope, payload []byte) tipkv.Cursor {
	b := make([]byte, 0, 2+len(payload)+cursorCheckSize)
	b = append(b, cursorFormat, kind)
	b = append(b, payload...)
	b = binary.BigEndian.AppendUint32(b, cursorCheck(scope, b))
	return tipkv.Cursor(base64.RawURLEncoding.EncodeToString(b))
}

func numberCursor(kind byte, scope []byte, n int64) tipkv.Cursor {
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], uint64(n))
	return makeCursor(kind, scope, p[:])
}

func cursorCheck(scope, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(scope, castagnoli), castagnoli, body)
}

// parseCursor checks that c is a cursor of the given kind made for scope
// and returns its payload. Anything else is ErrInvalid.
func parseCursor(c tipkv.Cursor, kind byte, scope []byte) ([]byte, error) {
	if len(c) > maxCursorLen {
		return nil, fmt.Errorf("%w: cursor of %d characters is too long", tipkv.ErrInvalid, len(c))
	}
	b, err := base64.RawURLEncoding.DecodeString(string(c))
	if err != nil {
		return nil, fmt.Errorf("%w: cursor is not URL-safe base64: %v", tipkv.ErrInvalid, err)
	}
	if len(b) < 2+cursorCheckSize {
		return nil, fmt.Errorf("%w: cursor of %d bytes is too short", tipkv.ErrInvalid, len(b))
	}
	body, check := b[:len(b)-cursorCheckSize], binary.BigEndian.Uint32(b[len(b)-cursorCheckSize:])
	if body[0] != cursorFormat {
		return nil, fmt.Errorf("%w: cursor format %d is unknown", tipkv.ErrInvalid, body[0])
	}
	if body[1] != kind {
		return nil, fmt.Errorf("%w: cursor of a %s read given to a %s read", tipkv.ErrInvalid, kindName(body[1]), kindName(kind))
	}
	if cursorCheck(scope, body) != check {
		return nil, fmt.Errorf("%w: cursor does not belong to this read (or is damaged)", tipkv.ErrInvalid)
	}
	return body[2:], nil
}

// parseNumberCursor parses a history or feed cursor: a version or position
// of at least 1.
func parseNumberCursor(c tipkv.Cursor, kind byte, scope []byte) (int64, error) {
	p, err := parseCursor(c, kind, scope)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, fmt.Errorf("%w: %s cursor holds %d bytes, want 8", tipkv.ErrInvalid, kindName(kind), len(p))
	}
	n := int64(binary.BigEndian.Uint64(p))
	if n < 1 {
		return 0, fmt.Errorf("%w: %s cursor holds %d", tipkv.ErrInvalid, kindName(kind), n)
	}
	return n, nil
}

// parseIDCursor parses a LatestAll cursor: a document id.
func parseIDCursor(c tipkv.Cursor, scope []byte) (string, error) {
	p, err := parseCursor(c, kindAll, scope)
	if err != nil {
		return "", err
	}
	if len(p) == 0 || len(p) > MaxIDSize {
		return "", fmt.Errorf("%w: LatestAll cursor holds an id of %d bytes", tipkv.ErrInvalid, len(p))
	}
	return string(p), nil
}

func kindName(k byte) string {
	switch k {
	case kindHistory:
		return "History"
	case kindAll:
		return "LatestAll"
	case kindFeed:
		return "feed"
	}
	return fmt.Sprintf("unknown (0x%02x)", k)
}
