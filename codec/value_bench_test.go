package codec_test

import (
	"testing"

	"github.com/tipkv/tipkv/codec"
)

type benchDoc struct {
	ID     string   `json:"id"`
	Email  string   `json:"email"`
	Age    int      `json:"age"`
	Scores []int    `json:"scores"`
	Tags   []string `json:"tags,omitempty"`
}

var benchValue = benchDoc{ID: "user-000123", Email: "ada@example.com", Age: 36, Scores: []int{1, 2, 3}, Tags: []string{"a"}}

func benchCodec(b *testing.B, c codec.Value[benchDoc]) {
	b.Run("op=append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			var err error
			if buf, err = c.Append(buf[:0], benchValue); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=decode", func(b *testing.B) {
		b.ReportAllocs()
		data, err := c.Append(nil, benchValue)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			var v benchDoc
			if err := c.Decode(data, &v); err != nil || v.Age != 36 {
				b.Fatal(v, err)
			}
		}
	})
}

func BenchmarkValue(b *testing.B) {
	b.Run("codec=msgpack", func(b *testing.B) { benchCodec(b, codec.Msgpack[benchDoc]{}) })
	b.Run("codec=msgpack,json-tags=ignored", func(b *testing.B) { benchCodec(b, codec.Msgpack[benchDoc]{IgnoreJSONTags: true}) })
	b.Run("codec=json", func(b *testing.B) { benchCodec(b, codec.JSON[benchDoc]{}) })
}
