package queuefmt_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

func TestRoundTrip(t *testing.T) {
	h := queuefmt.Header{Attempts: 3, Enqueued: 1700000000000000000, At: -5}
	v := append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, h), "payload"...)
	got, rest, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat)
	if err != nil || !reflect.DeepEqual(got, h) || string(rest) != "payload" {
		t.Fatalf("got %+v %q %v", got, rest, err)
	}
	if _, _, err := queuefmt.ParseHeader(v, queuefmt.DeadFormat); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("wrong tag: %v", err)
	}
	for _, tag := range []byte{queuefmt.ItemFormat, queuefmt.LeasedFormat} {
		v := append(queuefmt.AppendHeader(nil, tag, h), "payload"...)
		got, leased, rest, err := queuefmt.ParseItem(v)
		if err != nil || !reflect.DeepEqual(got, h) || leased != (tag == queuefmt.LeasedFormat) || string(rest) != "payload" {
			t.Fatalf("item 0x%02x: got %+v %v %q %v", tag, got, leased, rest, err)
		}
	}
	for _, tag := range []byte{queuefmt.DeadFormat, queuefmt.DeadRawFormat, queuefmt.StateFormat + 0x10} {
		if _, _, _, err := queuefmt.ParseItem(queuefmt.AppendHeader(nil, tag, h)); !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("an item with tag 0x%02x: %v", tag, err)
		}
	}
	for _, s := range []queuefmt.State{{Head: 7, Tail: 9}, {Head: 7, Tail: 9, Counted: true, Count: 2, CountTo: 9}, {Head: 7, Tail: 9, Counted: true, Count: 2, CountTo: 9, Run: true}} {
		gs, err := queuefmt.ParseState(queuefmt.AppendState(nil, s))
		if err != nil || gs != s {
			t.Fatalf("state %+v %v", gs, err)
		}
	}
	for _, c := range []queuefmt.Control{{}, {Paused: true}, {MaxInFlight: 5}, {Paused: true, MaxInFlight: queuefmt.MaxInFlight},
		{MaxInFlight: 2, Counted: true}, {Paused: true, MaxInFlight: 1, Counted: true, Leases: []queuefmt.Lease{{Seq: 3, End: 1700000000000000000}, {Seq: 9, End: -1}}}} {
		gc, err := queuefmt.ParseControl(queuefmt.AppendControl(nil, c))
		if err != nil || !reflect.DeepEqual(gc, c) {
			t.Fatalf("control %+v: %+v %v", c, gc, err)
		}
	}
	// An unknown tag or flag, a cap past the bound, a byte after the
	// value, a value cut short, leases out of order, twice or at 0 are
	// corrupt.
	for _, v := range [][]byte{{0x01, 0x02, 0x00}, {0x01, 0x00, 0x81, 0x80, 0x08}, {0x01, 0x01, 0x00, 0x00}, {0x01, 0x01}, {0x03, 0x00, 0x00},
		{0x02, 0x00, 0x01}, {0x02, 0x00, 0x01, 0x01, 0x03}, {0x02, 0x00, 0x01, 0x01, 0x03, 0x00, 0x00},
		{0x02, 0x00, 0x02, 0x02, 0x03, 0x00, 0x02, 0x00}, {0x02, 0x00, 0x02, 0x02, 0x03, 0x00, 0x03, 0x00}, {0x02, 0x00, 0x02, 0x01, 0x00, 0x00}} {
		if _, err := queuefmt.ParseControl(v); !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("control % x: %v", v, err)
		}
	}
	// A count that ends past the tail is corrupt.
	bad := queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 2, Counted: true, CountTo: 3})
	if _, err := queuefmt.ParseState(bad); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("count past tail: %v", err)
	}
}

// Metadata, alone or after headers, on every tag that takes it; a length
// past the value or past the bound is corrupt.
func TestMeta(t *testing.T) {
	meta := []byte("encoded metadata")
	hs := queuefmt.AppendPair(nil, "k", "v")
	for _, tag := range []byte{queuefmt.ItemFormat, queuefmt.LeasedFormat, queuefmt.DeadFormat} {
		for _, h := range []queuefmt.Header{{Attempts: 1, Enqueued: 2, At: 3, Meta: meta}, {Enqueued: 2, Headers: hs, Meta: meta}} {
			v := append(queuefmt.AppendHeader(nil, tag, h), "p"...)
			wantTag := tag | queuefmt.MetaFlag
			if h.Headers != nil {
				wantTag |= queuefmt.HeadersFlag
			}
			if v[0] != wantTag {
				t.Fatalf("tag 0x%02x written as 0x%02x", tag, v[0])
			}
			got, rest, err := queuefmt.ParseHeader(v, tag)
			if err != nil || !reflect.DeepEqual(got, h) || string(rest) != "p" {
				t.Fatalf("tag 0x%02x: %+v %q %v", tag, got, rest, err)
			}
			// Cut inside the metadata: corrupt.
			if _, _, err := queuefmt.ParseHeader(v[:len(v)-3], tag); !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("tag 0x%02x cut: %v", tag, err)
			}
		}
	}
	big := queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Meta: make([]byte, queuefmt.MaxMetaSize+1)})
	if _, _, err := queuefmt.ParseHeader(big, queuefmt.ItemFormat); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("metadata past the bound: %v", err)
	}
}

// A group, alone or after headers and metadata, on every tag that takes
// it; an empty group is none, and a length past the value or past the
// bound is corrupt.
func TestGroup(t *testing.T) {
	hs := queuefmt.AppendPair(nil, "k", "v")
	for _, tag := range []byte{queuefmt.ItemFormat, queuefmt.LeasedFormat, queuefmt.DeadFormat} {
		for _, h := range []queuefmt.Header{{Attempts: 1, Enqueued: 2, At: 3, Group: []byte("tenant-7")}, {Enqueued: 2, Headers: hs, Meta: []byte("m"), Group: []byte("g")}} {
			v := append(queuefmt.AppendHeader(nil, tag, h), "p"...)
			if v[0]&queuefmt.GroupFlag == 0 || v[0]&^queuefmt.Flags != tag {
				t.Fatalf("tag 0x%02x written as 0x%02x", tag, v[0])
			}
			got, rest, err := queuefmt.ParseHeader(v, tag)
			if err != nil || !reflect.DeepEqual(got, h) || string(rest) != "p" {
				t.Fatalf("tag 0x%02x: %+v %q %v", tag, got, rest, err)
			}
			if _, _, err := queuefmt.ParseHeader(v[:len(v)-3], tag); !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("tag 0x%02x cut: %v", tag, err)
			}
		}
	}
	if v := queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Group: []byte{}}); v[0] != queuefmt.ItemFormat {
		t.Fatalf("an empty group is written: % x", v)
	}
	big := queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Group: make([]byte, queuefmt.MaxGroupSize+1)})
	if _, _, err := queuefmt.ParseHeader(big, queuefmt.ItemFormat); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("group past the bound: %v", err)
	}
}

// The package doc's worked example, and headers on every tag that takes
// them.
func TestHeaders(t *testing.T) {
	hs := queuefmt.AppendPair(nil, "k", "v")
	v := append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Enqueued: 5, Headers: hs}), 0xab)
	want := []byte{0x11, 0x00, 0x0a, 0x00, 0x04, 0x01, 'k', 0x01, 'v', 0xab}
	if !bytes.Equal(v, want) {
		t.Fatalf("got % x, want % x", v, want)
	}
	hs = queuefmt.AppendPair(queuefmt.AppendPair(nil, "traceparent", "00-abc-def-01"), "tracestate", "x=1")
	for _, tag := range []byte{queuefmt.ItemFormat, queuefmt.LeasedFormat, queuefmt.DeadFormat} {
		h := queuefmt.Header{Attempts: 2, Enqueued: 3, At: 4, Headers: hs}
		v := append(queuefmt.AppendHeader(nil, tag, h), "p"...)
		if v[0] != tag|queuefmt.HeadersFlag {
			t.Fatalf("tag 0x%02x written as 0x%02x", tag, v[0])
		}
		got, rest, err := queuefmt.ParseHeader(v, tag)
		if err != nil || !reflect.DeepEqual(got, h) || string(rest) != "p" {
			t.Fatalf("tag 0x%02x: %+v %q %v", tag, got, rest, err)
		}
		var pairs []string
		queuefmt.Pairs(got.Headers, func(k, v []byte) { pairs = append(pairs, string(k)+"="+string(v)) })
		if !reflect.DeepEqual(pairs, []string{"traceparent=00-abc-def-01", "tracestate=x=1"}) {
			t.Fatalf("pairs %q", pairs)
		}
	}
	// Keys out of order or twice, an empty section and a length past the
	// value are corrupt.
	for _, hs := range [][]byte{
		queuefmt.AppendPair(queuefmt.AppendPair(nil, "b", ""), "a", ""),
		queuefmt.AppendPair(queuefmt.AppendPair(nil, "a", ""), "a", ""),
	} {
		v := queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Headers: hs})
		if _, _, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat); !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("headers % x: %v", hs, err)
		}
	}
	for _, v := range [][]byte{{0x11, 0, 0, 0, 0}, {0x11, 0, 0, 0, 5, 1, 'k'}} {
		if _, _, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat); !errors.Is(err, codec.ErrCorrupt) {
			t.Fatalf("% x: %v", v, err)
		}
	}
}

// Stored queue values are decoded from disk: any bytes give a value or an
// error matching ErrCorrupt, never a panic, and what parses re-encodes to
// the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Attempts: 1, Enqueued: 2, At: 3}))
	f.Add(queuefmt.AppendHeader(nil, queuefmt.LeasedFormat, queuefmt.Header{Attempts: 4, Enqueued: 5, At: 6}))
	f.Add(queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 2}))
	f.Add(queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 9, Counted: true, Count: 3, CountTo: 8}))
	f.Add(queuefmt.AppendState(nil, queuefmt.State{Head: 1, Tail: 9, Counted: true, Count: 3, CountTo: 8, Run: true}))
	f.Add(append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Attempts: 1, Headers: queuefmt.AppendPair(nil, "traceparent", "00-1-2-01")}), "x"...))
	f.Add(queuefmt.AppendHeader(nil, queuefmt.DeadFormat, queuefmt.Header{At: 7, Headers: queuefmt.AppendPair(queuefmt.AppendPair(nil, "a", "1"), "b", "2")}))
	f.Add(append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Enqueued: 2, Headers: queuefmt.AppendPair(nil, "k", "v"), Meta: []byte{0x01, 0x02}}), "x"...))
	f.Add(queuefmt.AppendHeader(nil, queuefmt.DeadFormat, queuefmt.Header{At: 7, Meta: []byte("m")}))
	f.Add(append(queuefmt.AppendHeader(nil, queuefmt.ItemFormat, queuefmt.Header{Enqueued: 2, Group: []byte("tenant")}), "x"...))
	f.Add(append(queuefmt.AppendHeader(nil, queuefmt.LeasedFormat, queuefmt.Header{Attempts: 1, Headers: queuefmt.AppendPair(nil, "k", "v"), Meta: []byte{0x01}, Group: []byte("g")}), "x"...))
	f.Add([]byte{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Add(queuefmt.AppendControl(nil, queuefmt.Control{Paused: true, MaxInFlight: 3}))
	f.Add(queuefmt.AppendControl(nil, queuefmt.Control{MaxInFlight: 3, Counted: true, Leases: []queuefmt.Lease{{Seq: 1, End: 5}, {Seq: 2, End: 6}}}))
	f.Fuzz(func(t *testing.T, v []byte) {
		if c, err := queuefmt.ParseControl(v); err != nil {
			if !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
		} else if c.MaxInFlight < 0 || c.MaxInFlight > queuefmt.MaxInFlight {
			t.Fatalf("%x: control %+v out of range", v, c)
		} else if c2, err := queuefmt.ParseControl(queuefmt.AppendControl(nil, c)); err != nil || !reflect.DeepEqual(c2, c) {
			t.Fatalf("%x: control %+v does not round trip", v, c)
		}
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
			if queuefmt.CheckHeaders(h.Headers) != nil {
				t.Fatalf("%x: headers % x pass ParseHeader but not CheckHeaders", v, h.Headers)
			}
			queuefmt.Pairs(h.Headers, func(k, v []byte) {})
			again := append(queuefmt.AppendHeader(nil, tag, h), rest...)
			if h2, rest2, err := queuefmt.ParseHeader(again, tag); err != nil || !reflect.DeepEqual(h2, h) || !bytes.Equal(rest2, rest) {
				t.Fatalf("%x: %+v does not round trip", v, h)
			}
		}
		h, leased, rest, err := queuefmt.ParseItem(v)
		switch {
		case err != nil:
			if !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
		case leased != (v[0]&^queuefmt.Flags == queuefmt.LeasedFormat):
			t.Fatalf("%x: leased is %v", v, leased)
		default:
			tag := v[0] &^ queuefmt.Flags
			again := append(queuefmt.AppendHeader(nil, tag, h), rest...)
			if h2, l2, rest2, err := queuefmt.ParseItem(again); err != nil || !reflect.DeepEqual(h2, h) || l2 != leased || !bytes.Equal(rest2, rest) {
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
		if s.Head < 0 || s.Tail < 0 || s.Head > queuefmt.MaxSeq || s.Tail > queuefmt.MaxSeq || s.Count < 0 || s.CountTo > s.Tail {
			t.Fatalf("%x: state %+v out of range", v, s)
		}
		if s2, err := queuefmt.ParseState(queuefmt.AppendState(nil, s)); err != nil || s2 != s {
			t.Fatalf("%x: state %+v does not round trip", v, s)
		}
	})
}
