package console

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Limits on the query parameters, in bytes or counts.
const (
	// maxLimit is the largest page a request may ask for (limit).
	maxLimit = 1000
	// maxCursor bounds an opaque cursor (after): a document cursor
	// holds an id of at most versioned.MaxIDSize bytes, escaped.
	maxCursor = 4 * versioned.MaxIDSize
	// maxSeqs bounds the sequence numbers of one action.
	maxSeqs = 1000
	// maxToken bounds a CSRF token; maxBack a redirect path.
	maxToken = 128
	maxBack  = 2048
)

// params are the parsed query (or form) parameters of a request. A field
// not given is its zero value. Every page and endpoint takes a subset
// (see parseParams): names and ids travel as parameters, never in the
// path, so that they may hold any bytes ("/" and invalid UTF-8 included).
type params struct {
	Name    string  // name: a collection, stream or queue
	ID      string  // id: a document id
	Prefix  string  // prefix: of document ids
	After   string  // after: where the page starts (a cursor, a name or a sequence number)
	Limit   int     // limit: the page's size, 1 to maxLimit
	Version int64   // v: a version, for as-of
	A, B    int64   // a, b: the versions a diff compares
	Seqs    []int64 // seq: sequence numbers (repeatable)
	Token   string  // token: an action's CSRF token
	Back    string  // back: where an HTML form's action redirects, a path in the console
}

// Parameter keys.
const (
	pName    = "name"
	pID      = "id"
	pPrefix  = "prefix"
	pAfter   = "after"
	pLimit   = "limit"
	pVersion = "v"
	pA       = "a"
	pB       = "b"
	pSeq     = "seq"
	pToken   = "token"
	pBack    = "back"
)

// allParams are every key parseParams knows.
var allParams = []string{pName, pID, pPrefix, pAfter, pLimit, pVersion, pA, pB, pSeq, pToken, pBack}

// parseParams parses a query string (or a form body) into params. It is
// strict, so that a mistyped link fails loudly rather than showing
// something else: a key outside allowed, a key other than seq given twice,
// a bad percent-escape, an empty or oversized name or id, a number that
// does not parse or is out of range, or a back path that leaves the
// console is an error that matches tipkv.ErrInvalid, naming the
// parameter. Values may hold any bytes, invalid UTF-8 included.
func parseParams(raw string, allowed ...string) (params, error) {
	var p params
	vs, err := url.ParseQuery(raw)
	if err != nil {
		return p, fmt.Errorf("%w: query: %v", tipkv.ErrInvalid, err)
	}
	for _, k := range sortedKeys(vs) {
		v := vs[k]
		if !slices.Contains(allowed, k) {
			return p, fmt.Errorf("%w: unknown parameter %q (this page takes %s)", tipkv.ErrInvalid, k, strings.Join(allowed, ", "))
		}
		if k != pSeq && len(v) > 1 {
			return p, fmt.Errorf("%w: parameter %q given %d times", tipkv.ErrInvalid, k, len(v))
		}
		if err := p.set(k, v); err != nil {
			return p, fmt.Errorf("%w: parameter %q: %v", tipkv.ErrInvalid, k, err)
		}
	}
	return p, nil
}

func sortedKeys(vs url.Values) []string {
	ks := make([]string, 0, len(vs))
	for k := range vs {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// set parses the values of key k into p.
func (p *params) set(k string, v []string) error {
	s := v[0]
	var err error
	switch k {
	case pName:
		p.Name, err = sized(s, 1, max(versioned.MaxNameSize, queue.MaxNameSize))
	case pID:
		p.ID, err = sized(s, 1, versioned.MaxIDSize)
	case pPrefix:
		p.Prefix, err = sized(s, 0, versioned.MaxIDSize)
	case pAfter:
		p.After, err = sized(s, 0, maxCursor)
	case pLimit:
		var n int64
		n, err = number(s, 1, maxLimit)
		p.Limit = int(n)
	case pVersion:
		p.Version, err = number(s, 1, 1<<63-1)
	case pA:
		p.A, err = number(s, 1, 1<<63-1)
	case pB:
		p.B, err = number(s, 1, 1<<63-1)
	case pSeq:
		if len(v) > maxSeqs {
			return fmt.Errorf("%d values, over the limit of %d", len(v), maxSeqs)
		}
		p.Seqs = make([]int64, len(v))
		for i, s := range v {
			if p.Seqs[i], err = number(s, 1, 1<<63-1); err != nil {
				return err
			}
		}
	case pToken:
		p.Token, err = sized(s, 0, maxToken)
	case pBack:
		p.Back, err = localPath(s)
	}
	return err
}

// sized returns s if its length in bytes is in [lo, hi].
func sized(s string, lo, hi int) (string, error) {
	switch {
	case len(s) < lo:
		return "", fmt.Errorf("empty")
	case len(s) > hi:
		return "", fmt.Errorf("%d bytes, over the limit of %d", len(s), hi)
	}
	return s, nil
}

// number parses s as a decimal integer in [lo, hi]: digits only, no sign,
// no leading zeros, so that every number has one spelling.
func number(s string, lo, hi int64) (int64, error) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s is outside [%d, %d]", s, lo, hi)
	}
	return n, nil
}

// localPath returns s if it is a path inside the site (it starts with one
// slash, not two, holds no backslash or control byte and no scheme), so
// that a redirect to it never leaves the console's origin.
func localPath(s string) (string, error) {
	if len(s) > maxBack {
		return "", fmt.Errorf("%d bytes, over the limit of %d", len(s), maxBack)
	}
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\") {
		return "", fmt.Errorf("%q is not a path on this site", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return "", fmt.Errorf("%q holds a control byte", s)
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "", fmt.Errorf("%q is not a path on this site", s)
	}
	return s, nil
}

// encode is the query string of p, for links: parseParams(p.encode(),
// allParams...) gives p back.
func (p params) encode() string {
	vs := url.Values{}
	add := func(k, v string) {
		if v != "" {
			vs.Set(k, v)
		}
	}
	addN := func(k string, n int64) {
		if n != 0 {
			vs.Set(k, strconv.FormatInt(n, 10))
		}
	}
	add(pName, p.Name)
	add(pID, p.ID)
	add(pPrefix, p.Prefix)
	add(pAfter, p.After)
	addN(pLimit, int64(p.Limit))
	addN(pVersion, p.Version)
	addN(pA, p.A)
	addN(pB, p.B)
	for _, s := range p.Seqs {
		vs.Add(pSeq, strconv.FormatInt(s, 10))
	}
	add(pToken, p.Token)
	add(pBack, p.Back)
	return vs.Encode()
}
