package tipkv

import "fmt"

// Query shapes a newest-first read: a document's History, the LatestAll of
// a collection, a feed's Newest and Between (package versioned). The zero
// Query reads everything, newest first.
//
// A Query is a plain value: copy it, keep it, reuse it with another After
// to read the next page.
type Query struct {
	// Limit is the most items the read yields. The default (0) is no
	// limit.
	Limit int

	// From and To bound the numbers read to [From, To], both inclusive:
	// versions for History, positions (Unix nanoseconds) for Newest and
	// Between. Zero leaves that side open. LatestAll refuses them.
	From, To int64

	// Prefix restricts LatestAll to the ids that begin with Prefix (a byte
	// prefix). The other reads refuse it. The default ("") is every id.
	Prefix string

	// After resumes a read just after the item that gave this cursor (its
	// Cursor method), so that the next page starts where the last one
	// ended. The default ("") starts at the newest item in bounds.
	After Cursor
}

// Cursor is an opaque position in a newest-first read, as returned by the
// Cursor method of the items the read yields. It is a printable string
// (URL-safe base64) to hand to clients and take back from them. A cursor
// is only valid for the read that produced it (the same collection and
// document, or the same stream): reads refuse another read's cursor, and
// any malformed one, with ErrInvalid.
type Cursor string

// Validate reports whether q is well formed: a non-negative Limit, From and
// To, and From <= To when both are set. It returns an error matching
// ErrInvalid otherwise. Reads validate their query themselves; Validate is
// for checking one early, when it comes from a request.
func (q Query) Validate() error {
	switch {
	case q.Limit < 0:
		return fmt.Errorf("%w: query: negative limit %d", ErrInvalid, q.Limit)
	case q.From < 0:
		return fmt.Errorf("%w: query: negative From %d", ErrInvalid, q.From)
	case q.To < 0:
		return fmt.Errorf("%w: query: negative To %d", ErrInvalid, q.To)
	case q.To != 0 && q.From > q.To:
		return fmt.Errorf("%w: query: From %d is after To %d", ErrInvalid, q.From, q.To)
	}
	return nil
}
