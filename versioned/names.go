package versioned

import (
	"fmt"
	"iter"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
)

// Collections yields the names of the collections of db that hold at least
// one version (a delete marker counts; a collection whose documents were
// all purged is gone), in bytewise order. It is a skip-scan over the
// versions family, [01, 02): one seek per collection, however many
// documents each holds. An error is yielded once, as the last pair.
func Collections(db *tipkv.DB) iter.Seq2[string, error] {
	return names(db, codec.FamilyVersions, "collection")
}

// Streams yields the names of the feed streams of db that hold at least
// one event (a stream trimmed to empty keeps only its trim mark, and is
// not one), in bytewise order. It is a skip-scan over the feed family,
// [04, 05): one seek per stream. An error is yielded once, as the last
// pair.
func Streams(db *tipkv.DB) iter.Seq2[string, error] {
	return names(db, codec.FamilyFeed, "stream")
}

func names(db *tipkv.DB, f codec.Family, what string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		stopped := false
		err := scanNames(db, f, func(name string) bool {
			stopped = !yield(name, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield("", fmt.Errorf("%s names: %w", what, err))
		}
	}
}

// scanNames yields the name segment of every prefix of family f, then
// seeks past that name's keys. Its error is for the caller to yield.
func scanNames(db *tipkv.DB, f codec.Family, yield func(string) bool) (err error) {
	ln, err := link.Of(db)
	if err != nil {
		return err
	}
	lo := codec.AppendFamily(nil, f)
	it, err := newIter(ln.Store, lo, codec.PrefixEnd(lo), 1)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; {
		k := it.Key()
		name, rest, err := codec.DecodeString(k[1:])
		if err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		if !(f == codec.FamilyFeed && isMarkSuffix(rest)) && !yield(name) {
			return nil
		}
		ok = it.SeekGE(codec.PrefixEnd(namePrefix(f, name)))
	}
	return it.Error()
}
