package versioned

import (
	"fmt"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// Where a hot Latest's time goes above the storage seam's Get (issue 30):
// Latest's steps added one at a time, each paired with a Get of the same
// keys through the seam in alternating chunks of 64, on 1,000 documents
// of 5 versions this DB wrote (the version cache knows them; the keys
// are in the memtable). part=get-append is the engine call alone, into
// a reused buffer; part=lookup adds the document's key and the version
// hints' lookup (the mutex path for a key whose slot another holds);
// part=decode adds decoding the stored value into a Doc; part=latest is
// Latest itself. The differences between the rows are the steps' costs:
//
//	go test -run '^$' -bench 'BenchmarkLatestParts' -benchtime 1000000x ./versioned/
func BenchmarkLatestParts(b *testing.B) {
	for _, part := range []string{"get-append", "lookup", "decode", "latest"} {
		b.Run("part="+part+"/pair=store-get", func(b *testing.B) { benchLatestPart(b, part) })
	}
}

func benchLatestPart(b *testing.B, part string) {
	db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	c, err := NewCollection(db, "docs", &Options[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 100)
	ids := make([]string, 1000)
	keys := make([][]byte, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("doc-%04d", i)
		for range 5 {
			if _, err := c.Put(db, ids[i], val); err != nil {
				b.Fatal(err)
			}
		}
		keys[i] = numberKey(c.docPrefix(nil, ids[i]), 5)
	}
	s := c.store
	buf := make([]byte, 0, 256)
	// known is the lookup step: the latest version from the hints, or
	// under the writer's mutex.
	known := func(p []byte) int64 {
		latest, _, _, ok := c.w.cache.hints.lookup(p)
		if !ok {
			latest, _, _ = c.w.knownLocked(p)
		}
		return latest
	}
	op := func(j int) error {
		id := ids[j%len(ids)]
		switch part {
		case "get-append":
			buf = append(buf[:0], keys[j%len(keys)]...)
			var err error
			buf, err = engine.GetAppend(s, buf, buf)
			return err
		case "lookup":
			p := c.docPrefix(buf[:0], id)
			p = codec.AppendDesc(p, known(p))
			var err error
			buf, err = engine.GetAppend(s, p, p)
			return err
		case "decode":
			p := c.docPrefix(buf[:0], id)
			latest := known(p)
			p = codec.AppendDesc(p, latest)
			k := len(p)
			p, err := engine.GetAppend(s, p, p)
			buf = p
			if err != nil {
				return err
			}
			d, err := c.docOne(id, latest, p[k:])
			if err == nil && d.Version != 5 {
				err = fmt.Errorf("version %d", d.Version)
			}
			return err
		default:
			d, err := c.Latest(id)
			if err == nil && d.Version != 5 {
				err = fmt.Errorf("version %d", d.Version)
			}
			return err
		}
	}
	var tOurs, tBase time.Duration
	const chunk = 64
	b.ReportAllocs()
	b.ResetTimer()
	for i, k := 0, 0; i < b.N; i, k = i+chunk, k+1 {
		n := min(chunk, b.N-i)
		ours := func() {
			start := time.Now()
			for j := i; j < i+n; j++ {
				if err := op(j); err != nil {
					b.Fatal(err)
				}
			}
			tOurs += time.Since(start)
		}
		base := func() {
			start := time.Now()
			for j := i; j < i+n; j++ {
				if v, err := s.Get(keys[(j+500)%len(keys)]); err != nil || len(v) < len(val) {
					b.Fatal(len(v), err)
				}
			}
			tBase += time.Since(start)
		}
		if k%2 == 0 {
			ours()
			base()
		} else {
			base()
			ours()
		}
	}
	b.ReportMetric(float64(tOurs)/float64(tBase), "ratio")
	b.ReportMetric(float64(tBase.Nanoseconds())/float64(b.N), "base-ns/op")
}
