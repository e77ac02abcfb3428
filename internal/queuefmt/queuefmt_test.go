package queuefmt_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

func TestRoundTrip(t *testing.T) {
	h := queuefmt.Header{Attempts: 3, Enqueued: 1700000000000000000, At: -5}
	v := append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, h), "payload"...)
	got, rest, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat)
	if err != nil || got != h || string(rest) != "payload" {
		t.Fatalf("got %+v %q %v", got, rest, err)
	}
	if _, _, err := queuefmt.ParseHeader(v, queuefmt.DeadFormat); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("wrong tag: %v", err)
	}
	for _, tag := range []byte{queuefmt.ItemFormat, queuefmt.LeasedFormat} {
		v := append(queuefmt.AppendHeader(nil, tag, h), "payload"...)
		got, leased, rest, err := queuefmt.ParseItem(v)
		if err != nil || got != h || leased != (tag == queuefmt.LeasedFormat) || string(rest) != "payload" {
			t.Fatalf("item 0x%02x: got %+v %v %q %v", tag, got, leased, rest, err)
		}
	}
	for _, tag := range []byte{queuefmt.DeadFormat, queuefmt.DeadRawFormat, queuefmt.StateFormat + 0x10} {
		if _, _, _, err := queuefmt.ParseItem(queuefmt.AppendHeader(nil, tag, h)); !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("an item with tag 0x%02x: %v", tag, err)
		}
	}
	s := queuefmt.State{Head: 7, Tail: 9}
	gs, err := queuefmt.ParseState(queuefmt.AppendState(nil, s))
	if err != nil || gs != s {
		t.Fatalf("state %+v %v", gs, err)
	}
}

// Stored queue values are decoded from disk: any bytes give a value or an
// error matching ErrCorrupt, never a panic, and what parses re-encodes to
// the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Attempts: 1, Enqueued: 2, At: 3}))
	f.Add(queuefmt.AppendHeader(nil, queuefmt.LeasedFormat, queuefmt.Header{Attempts: 4, Enqueued: 5, At: 6}))
	f.Add(queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 2}))
	f.Add([]byte{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		for _, tag := range []byte{queuefmt.ItemFormat, queuefmt.DeadFormat, queuefmt.LeasedFormat} {
			h, rest, err := queuefmt.ParseHeader(v, tag)
			if err != nil {
				if !errors.Is(err, codec.ErrCorrupt) {
					t.Fatalf("error %v does not match ErrCorrupt", err)
				}
				continue
			}
			if h.Attempts < 0 {
				t.Fatalf("negative attempts from %x", v)
			}
			again := append(queuefmt.AppendHeader(nil, tag, h), rest...)
			if h2, rest2, err := queuefmt.ParseHeader(again, tag); err != nil || h2 != h || !bytes.Equal(rest2, rest) {
				t.Fatalf("%x: %+v does not round trip", v, h)
			}
		}
		h, leased, rest, err := queuefmt.ParseItem(v)
		switch {
		case err != nil:
			if !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
		case leased != (v[0] == queuefmt.LeasedFormat):
			t.Fatalf("%x: leased is %v", v, leased)
		default:
			tag := v[0]
			again := append(queuefmt.AppendHeader(nil, tag, h), rest...)
			if h2, l2, rest2, err := queuefmt.ParseItem(again); err != nil || h2 != h || l2 != leased || !bytes.Equal(rest2, rest) {
				t.Fatalf("%x: item %+v does not round trip", v, h)
			}
		}
		s, err := queuefmt.ParseState(v)
		if err != nil {
			if !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if s.Head < 0 || s.Tail < 0 || s.Head > queuefmt.MaxSeq || s.Tail > queuefmt.MaxSeq {
			t.Fatalf("%x: state %+v out of range", v, s)
		}
	})
}
