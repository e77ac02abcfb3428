package queue

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tipkv/tipkv"
)

// ID names one delivery of a message: its sequence number and the lease
// Receive gave it. Pass it back to Ack, Release, Retry or Extend. An ID is
// valid in the process that received it (the DB handle, on a shared
// engine), for as long as the lease holds (and after, until the message is
// delivered again); it never names a later delivery.
//
// The zero ID names no lease: messages from Peek and Pop carry it.
type ID struct {
	seq   int64
	lease uint64
}

// maxIDLen bounds the text form: two 20-digit numbers and a dot.
const maxIDLen = 41

// Seq returns the message's sequence number in its queue.
func (id ID) Seq() int64 { return id.seq }

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// String returns the text form "seq.lease", both in decimal, which
// ParseID reads back.
func (id ID) String() string {
	return strconv.FormatInt(id.seq, 10) + "." + strconv.FormatUint(id.lease, 10)
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseID.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseID parses the text form of an ID, as String writes it: two decimal
// numbers without signs or leading zeros, joined by a dot. Anything else is
// an error matching tipkv.ErrInvalid.
func ParseID(s string) (ID, error) {
	bad := func(why string) (ID, error) {
		if len(s) > maxIDLen {
			s = s[:maxIDLen] + "..."
		}
		return ID{}, fmt.Errorf("%w: message id %q: %s", tipkv.ErrInvalid, s, why)
	}
	if len(s) > maxIDLen {
		return bad("too long")
	}
	seqText, leaseText, ok := strings.Cut(s, ".")
	if !ok {
		return bad("want seq.lease")
	}
	if !canonical(seqText) || !canonical(leaseText) {
		return bad("want two decimal numbers without sign or leading zeros")
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq >= maxSeq {
		return bad("sequence number out of range")
	}
	lease, err := strconv.ParseUint(leaseText, 10, 64)
	if err != nil {
		return bad("lease out of range")
	}
	return ID{seq: seq, lease: lease}, nil
}

// canonical reports whether s is a decimal number as strconv formats it:
// digits only, no leading zero unless s is "0".
func canonical(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
