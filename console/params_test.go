package console

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

func TestParseParams(t *testing.T) {
	p, err := parseParams("name=a%00%FFb&id=x%2Fy&limit=10&seq=3&seq=1&v=7&back=%2Fqueue%3Fname%3Dq", allParams...)
	require.NoError(t, err)
	require.Equal(t, params{Name: "a\x00\xffb", ID: "x/y", Limit: 10, Seqs: []int64{3, 1}, Version: 7, Back: "/queue?name=q"}, p)

	for _, bad := range []string{
		"x=1", "name=a&name=b", "name=", "id=", "limit=0", "limit=1001", "limit=+1", "limit=1e3", "limit=007",
		"v=-1", "v=0", "a=9223372036854775808", "seq=", "seq=1&seq=x", "%zz=1", "name=%zz", "back=http://x/",
		"back=//x/", "back=/a%5Cb", "back=x", "back=/%0a", "name=" + strings.Repeat("n", 257),
		"id=" + strings.Repeat("i", 1025), "seq=1" + strings.Repeat("&seq=1", 1000), "a=1;b=2",
	} {
		_, err := parseParams(bad, allParams...)
		require.ErrorIs(t, err, tipkv.ErrInvalid, bad)
	}
	_, err = parseParams("name=x", pID)
	require.ErrorContains(t, err, `unknown parameter "name"`)
}

// FuzzParseParams: any query string either parses, and then its encoding
// parses back to the same params within every limit, or fails with
// ErrInvalid; never a panic.
func FuzzParseParams(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := parseParams(raw, allParams...)
		if err != nil {
			if !errors.Is(err, tipkv.ErrInvalid) {
				t.Fatalf("%q: %v does not match ErrInvalid", raw, err)
			}
			return
		}
		if len(p.Name) > 256 || len(p.ID) > 1024 || len(p.Prefix) > 1024 || p.Limit < 0 || p.Limit > maxLimit ||
			p.Version < 0 || p.A < 0 || p.B < 0 || len(p.Seqs) > maxSeqs || len(p.Token) > maxToken {
			t.Fatalf("%q: out of limits: %+v", raw, p)
		}
		for _, s := range p.Seqs {
			if s < 1 {
				t.Fatalf("%q: seq %d", raw, s)
			}
		}
		if p.Back != "" && (!strings.HasPrefix(p.Back, "/") || strings.HasPrefix(p.Back, "//")) {
			t.Fatalf("%q: back %q leaves the site", raw, p.Back)
		}
		q, err := parseParams(p.encode(), allParams...)
		if err != nil {
			t.Fatalf("%q: encoding %q does not parse: %v", raw, p.encode(), err)
		}
		require.Equal(t, p, q, "%q: round trip through %q", raw, p.encode())
	})
}
