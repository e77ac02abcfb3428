package tipkv

import (
	"fmt"

	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
)

// Metadata says who made a write and why: the provenance that a version
// of a document or a queue message carries beside its commit time. It has
// one shape across tipkv's packages; each stores it with what a write
// makes, when the write asks (WithMetadata, Batch.SetMetadata), and
// decodes it only when a read asks for it (versioned's Doc.Metadata,
// queue's Message.Metadata). Feed events do not carry it yet.
//
// Bounds (past any of them a write fails with ErrInvalid and writes
// nothing): each of Author, Reason, CorrelationID and CausationID, and each
// header value, at most MaxMetadataField bytes; header keys 1 to
// MaxMetadataKey bytes; at most MaxMetadataHeaders headers; at most
// MaxMetadataSize bytes encoded in all. A Metadata is a value: safe to
// share once built.
type Metadata struct {
	// Author is who made the write: a user, a service, a job.
	Author string
	// Reason says why, in words.
	Reason string
	// CorrelationID ties the write to the request or workflow it belongs to.
	CorrelationID string
	// CausationID names the message or event that caused the write.
	CausationID string
	// Headers are any other string pairs.
	Headers map[string]string
}

// The bounds of Metadata.
const (
	MaxMetadataField   = docfmt.MaxMetaField
	MaxMetadataKey     = docfmt.MaxMetaKey
	MaxMetadataHeaders = docfmt.MaxMetaHeaders
	MaxMetadataSize    = docfmt.MaxMetaSize
)

// encode returns m encoded for storage, or ErrInvalid past its bounds.
func (m Metadata) encode() ([]byte, error) {
	b, err := docfmt.AppendMeta(nil, docfmt.Meta(m))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return b, nil
}

// WithMetadata returns a Writer that writes through w (a *DB or a *Batch)
// with m: every version or queue message a write through it makes carries
// m, whatever the Update's own metadata (Batch.SetMetadata). Metadata past its bounds makes
// every write through the returned Writer fail with ErrInvalid. Wrapping a
// Writer WithMetadata returned replaces its metadata. Safe for concurrent
// use as far as w is.
//
//	users.Put(tipkv.WithMetadata(db, tipkv.Metadata{Author: "ada", Reason: "typo"}), "home", page)
func WithMetadata(w Writer, m Metadata) Writer {
	b, err := m.encode()
	return link.NewWithMeta(w, b, err)
}

// SetMetadata gives the Update's writes m: every version and queue message
// the Update writes from now on without metadata of its own
// (WithMetadata) carries it. It
// fails with ErrInvalid past the bounds of Metadata, and then changes
// nothing. An Update that runs again (a shared engine) sets it again, as
// its function runs again.
func (b *Batch) SetMetadata(m Metadata) error {
	tx, err := link.TxOf(b)
	if err != nil {
		return err
	}
	enc, err := m.encode()
	if err != nil {
		return err
	}
	tx.SetMeta(enc)
	return nil
}
