package sqlkv_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
)

// The store against raw pgx sending the same statements in the same
// pipeline shapes, on the same server in the same run: the ratio is what
// the store adds (planning, copies, error mapping) to the SQL it sends.
//
//	go test -run '^$' -bench . -benchtime 2000x -count 3 ./...
//
// (in sqlkv/; the tests start their own server, with fsync off).

func benchStore(b *testing.B) (*sqlkv.Store, string) {
	s := openStore(b, sqlkv.Config{})
	return s, pgx.Identifier{s.Name()}.Sanitize()
}

// op=guarded-put: a versioned Put: the latest version present, the next
// absent, the next written.
func BenchmarkGuardedPut(b *testing.B) {
	b.Run("impl=sqlkv", func(b *testing.B) {
		s, _ := benchStore(b)
		mustSet(b, s, vkey("d", 0), []byte("v0"))
		val := []byte(`{"name":"a document","n":1}`)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			v := int64(i)
			err := apply(s, func(bt engine.Batch) {
				_ = bt.Require(engine.Present(vkey("d", v)))
				_ = bt.Require(engine.Absent(vkey("d", v+1)))
				_ = bt.Set(vkey("d", v+1), val)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=pgx", func(b *testing.B) {
		s, t := benchStore(b)
		mustSet(b, s, vkey("d", 0), []byte("v0"))
		val := []byte(`{"name":"a document","n":1}`)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			v := int64(i)
			bt := &pgx.Batch{}
			bt.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
			bt.Queue(`SELECT 1/count(*) FROM (SELECT 1 FROM `+t+` WHERE k = $1 FOR KEY SHARE) s`, vkey("d", v))
			bt.Queue(`INSERT INTO `+t+` (k, v) VALUES ($1, $2)`, vkey("d", v+1), val)
			bt.Queue("COMMIT")
			if err := s.Pool().SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// op=newest-1: the newest version of a document of 20 versions: an
// iterator's first row, then Close.
func BenchmarkNewest(b *testing.B) {
	setup := func(b *testing.B) (*sqlkv.Store, string) {
		s, t := benchStore(b)
		require.NoError(b, apply(s, func(bt engine.Batch) {
			for v := int64(1); v <= 20; v++ {
				_ = bt.Set(vkey("d", v), []byte(fmt.Sprintf(`{"version":%d}`, v)))
			}
		}))
		return s, t
	}
	lo := doc("d")
	hi := codec.PrefixEnd(lo)
	b.Run("impl=sqlkv", func(b *testing.B) {
		s, _ := setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			it, err := s.NewIter(lo, hi)
			if err != nil {
				b.Fatal(err)
			}
			if !it.First() {
				b.Fatal(it.Error())
			}
			if v, _ := it.Value(); string(v) != `{"version":20}` {
				b.Fatalf("got %s", v)
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same view: BEGIN with the first page, then COMMIT.
	b.Run("impl=pgx", func(b *testing.B) {
		s, t := setup(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			conn, err := s.Pool().Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			bt := &pgx.Batch{}
			bt.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
			bt.Queue(`SELECT k, v FROM `+t+` WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3`, lo, hi, 8)
			br := conn.SendBatch(ctx, bt)
			_, _ = br.Exec()
			rows, _ := br.Query()
			var k, v []byte
			rows.Next()
			if err := rows.Scan(&k, &v); err != nil {
				b.Fatal(err)
			}
			rows.Close()
			if err := br.Close(); err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
				b.Fatal(err)
			}
			conn.Release()
		}
	})
	// One statement, no view: the floor.
	b.Run("impl=pgx-single", func(b *testing.B) {
		s, t := setup(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			var k, v []byte
			if err := s.Pool().QueryRow(ctx, `SELECT k, v FROM `+t+` WHERE k >= $1 AND k < $2 ORDER BY k LIMIT 1`, lo, hi).Scan(&k, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// op=batch,rows=100: 100 events appended to a feed in one batch.
func BenchmarkBatch100(b *testing.B) {
	stream := codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeed), "events")
	key := func(i int) []byte { return codec.AppendDesc(append([]byte(nil), stream...), int64(i)) }
	val := []byte(`{"event":"something happened","at":1234567890}`)
	b.Run("impl=sqlkv", func(b *testing.B) {
		s, _ := benchStore(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			err := apply(s, func(bt engine.Batch) {
				for j := range 100 {
					_ = bt.Set(key(i*100+j), val)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	// The store's statements: the prefix's shared advisory lock and one
	// upsert of the run.
	b.Run("impl=pgx", func(b *testing.B) {
		s, t := benchStore(b)
		h := fnv.New64a()
		h.Write(stream)
		id := int64(h.Sum64())
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			ks := make([][]byte, 100)
			vs := make([][]byte, 100)
			for j := range 100 {
				ks[j], vs[j] = key(i*100+j), val
			}
			bt := &pgx.Batch{}
			bt.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
			bt.Queue(`SELECT pg_advisory_xact_lock_shared($1)`, id)
			bt.Queue(`INSERT INTO `+t+` (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, ks, vs)
			bt.Queue("COMMIT")
			if err := s.Pool().SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// 100 single-row upserts in one pipeline: what merging a run saves.
	b.Run("impl=pgx-rows", func(b *testing.B) {
		s, t := benchStore(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			bt := &pgx.Batch{}
			bt.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
			for j := range 100 {
				bt.Queue(`INSERT INTO `+t+` (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, key(i*100+j), val)
			}
			bt.Queue("COMMIT")
			if err := s.Pool().SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
