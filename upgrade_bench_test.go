package tipkv_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkUpgrade times the Open that upgrades a store of format 2 on
// disk: documents of 10 versions of 100 bytes, a share of them starting
// with C1 00 (escaped by the upgrade), the rest plain (only read). Each
// iteration opens a fresh copy, copied outside the timer. Run it with
// -benchtime=1x: the store is built once per case.
func BenchmarkUpgrade(b *testing.B) {
	for _, c := range []struct {
		versions, affectedPerMille int
	}{{100_000, 10}, {100_000, 0}, {1_000_000, 0}} {
		b.Run(fmt.Sprintf("versions=%d,affected=%.1f%%", c.versions, float64(c.affectedPerMille)/10), func(b *testing.B) {
			src := filepath.Join(b.TempDir(), "src")
			db, err := tipkv.Open(src, &tipkv.Options{NoSync: true})
			require.NoError(b, err)
			s, err := link.StoreOf(db)
			require.NoError(b, err)
			value := make([]byte, 100)
			for i := range value {
				value[i] = 'a' + byte(i%26)
			}
			escaped := append([]byte{0xc1, 0x00}, value[2:]...)
			batch := s.NewBatch()
			for i := range c.versions {
				v := value
				if i%1000 < c.affectedPerMille {
					v = escaped
				}
				require.NoError(b, batch.Set(versionKey("docs", fmt.Sprintf("doc-%07d", i/10), int64(i%10+1)), v))
				if batch.Len() == 10_000 || i == c.versions-1 {
					require.NoError(b, batch.Apply(false))
					require.NoError(b, batch.Close())
					batch = s.NewBatch()
				}
			}
			require.NoError(b, batch.Close())
			b2 := s.NewBatch()
			require.NoError(b, b2.Set(codec.AppendString([]byte{0x00}, "format"), []byte(strconv.Itoa(2))))
			require.NoError(b, b2.Apply(true))
			require.NoError(b, b2.Wait())
			require.NoError(b, b2.Close())
			require.NoError(b, db.Compact())
			require.NoError(b, db.Close())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "db")
				copyStore(b, src, dir)
				b.StartTimer()
				db, err := tipkv.Open(dir, nil)
				b.StopTimer()
				require.NoError(b, err)
				docs, err := versioned.NewCollection[[]byte](db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
				require.NoError(b, err)
				d, err := docs.Get("doc-0000000", 1)
				require.NoError(b, err)
				want := value
				if c.affectedPerMille > 0 {
					want = escaped
				}
				require.Equal(b, want, d.Value, "the first version reads as written")
				require.NoError(b, db.Close())
				b.StartTimer()
			}
		})
	}
}

func copyStore(b *testing.B, src, dst string) {
	require.NoError(b, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(b, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(b, err)
		require.NoError(b, os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644))
	}
}
