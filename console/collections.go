package console

import (
	"errors"
	"fmt"
	"iter"
	"net/http"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// Page sizes when a request gives no limit.
const (
	defaultNames   = 100
	defaultDocs    = 50
	defaultHistory = 20
	defaultEvents  = 50
	defaultQueue   = 50
	// deadShown is how many of a queue's oldest dead letters its page
	// shows.
	deadShown = 50
)

func limitOr(p params, n int) int {
	if p.Limit > 0 {
		return p.Limit
	}
	return n
}

func (c *Console) viewCollections(r *http.Request, p params) (any, error) {
	return pageNames(versioned.Collections(c.db), p.After, limitOr(p, defaultNames))
}

func (c *Console) viewStreams(r *http.Request, p params) (any, error) {
	return pageNames(versioned.Streams(c.db), p.After, limitOr(p, defaultNames))
}

// pageNames returns up to limit names after after. The name listings of
// package versioned start at the first name, so a page deep in a long
// list costs a seek per name before it.
func pageNames(names iter.Seq2[string, error], after string, limit int) (Names, error) {
	out := Names{Names: []Name{}}
	for name, err := range names {
		if err != nil {
			return Names{}, err
		}
		if after != "" && name <= after {
			continue
		}
		if len(out.Names) == limit {
			out.Next = out.Names[limit-1].Name
			break
		}
		out.Names = append(out.Names, nameOf(name))
	}
	return out, nil
}

func needName(p params) error {
	if p.Name == "" {
		return fmt.Errorf("%w: parameter %q is required", tipkv.ErrInvalid, pName)
	}
	return nil
}

func (c *Console) viewCollection(r *http.Request, p params) (any, error) {
	if err := needName(p); err != nil {
		return nil, err
	}
	coll, err := c.collection(p.Name)
	if err != nil {
		return nil, err
	}
	limit := limitOr(p, defaultDocs)
	rend := c.renderer(KindCollection, p.Name)
	out := Documents{Collection: p.Name, Prefix: p.Prefix, Documents: []Document{}}
	var last versioned.Doc[[]byte]
	q := tipkv.Query{Prefix: p.Prefix, After: tipkv.Cursor(p.After), Limit: limit + 1}
	for d, err := range coll.LatestAll(q) {
		if err != nil {
			return nil, err
		}
		if len(out.Documents) == limit {
			out.Next = string(last.Cursor())
			break
		}
		out.Documents = append(out.Documents, c.document(rend, d))
		last = d
	}
	return out, nil
}

func (c *Console) document(rend Renderer, d versioned.Doc[[]byte]) Document {
	doc := Document{ID: d.ID, IDHex: hexIfInvalid(d.ID), Version: d.Version, Deleted: d.Deleted}
	if !d.Deleted {
		doc.Value = c.value(rend, d.Value)
	}
	if !d.Untimed() {
		t := d.Time.UTC()
		doc.Committed = &t
	}
	if d.HasMetadata() {
		m, err := d.Metadata()
		if err != nil {
			doc.MetadataError = err.Error()
		} else {
			doc.Metadata = &m
		}
	}
	return doc
}

func needID(p params) error {
	if err := needName(p); err != nil {
		return err
	}
	if p.ID == "" {
		return fmt.Errorf("%w: parameter %q is required", tipkv.ErrInvalid, pID)
	}
	return nil
}

func (c *Console) viewDocument(r *http.Request, p params) (any, error) {
	if err := needID(p); err != nil {
		return nil, err
	}
	coll, err := c.collection(p.Name)
	if err != nil {
		return nil, err
	}
	rend := c.renderer(KindCollection, p.Name)
	out := History{Collection: p.Name, ID: p.ID, IDHex: hexIfInvalid(p.ID), Versions: []Document{}, V: p.Version}
	if out.Count, err = coll.Count(p.ID); err != nil {
		return nil, err
	}
	if out.Count == 0 {
		return nil, fmt.Errorf("%w: collection %q has no document %q", tipkv.ErrNotFound, p.Name, p.ID)
	}
	docs, next, err := coll.HistoryPage(p.ID, tipkv.Query{After: tipkv.Cursor(p.After), Limit: limitOr(p, defaultHistory)})
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		out.Versions = append(out.Versions, c.document(rend, d))
	}
	out.Next = string(next)
	if p.Version > 0 {
		d, err := coll.AsOf(p.ID, p.Version)
		switch {
		case err == nil:
			doc := c.document(rend, d)
			out.AsOf = &doc
		case !errors.Is(err, tipkv.ErrNotFound):
			return nil, err
		}
	}
	return out, nil
}

// viewDiff compares versions a and b of a document (by default the latest
// and the one before it; a alone: a and the latest).
func (c *Console) viewDiff(r *http.Request, p params) (any, error) {
	if err := needID(p); err != nil {
		return nil, err
	}
	coll, err := c.collection(p.Name)
	if err != nil {
		return nil, err
	}
	rend := c.renderer(KindCollection, p.Name)
	a, b := p.A, p.B
	if b == 0 {
		docs, _, err := coll.HistoryPage(p.ID, tipkv.Query{Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(docs) == 0 {
			return nil, fmt.Errorf("%w: collection %q has no document %q", tipkv.ErrNotFound, p.Name, p.ID)
		}
		b = docs[0].Version
	}
	if a == 0 {
		a = max(b-1, 1)
	}
	out := Diff{Collection: p.Name, ID: p.ID, IDHex: hexIfInvalid(p.ID)}
	if out.A, err = c.version(coll, rend, p.ID, a); err != nil {
		return nil, err
	}
	if out.B, err = c.version(coll, rend, p.ID, b); err != nil {
		return nil, err
	}
	out.Lines = diffLines(out.A.Value.Pretty(), out.B.Value.Pretty())
	for _, l := range out.Lines {
		if l.Op != " " {
			out.Changed++
		}
	}
	return out, nil
}

// version reads version v of document id exactly, a delete marker
// included (Get answers ErrNotFound for a marker; History shows it).
func (c *Console) version(coll *versioned.Collection[[]byte], rend Renderer, id string, v int64) (Document, error) {
	for d, err := range coll.History(id, tipkv.Query{From: v, To: v, Limit: 1}) {
		if err != nil {
			return Document{}, err
		}
		return c.document(rend, d), nil
	}
	return Document{}, fmt.Errorf("%w: collection %q, document %q: no version %d", tipkv.ErrNotFound, coll.Name(), id, v)
}
