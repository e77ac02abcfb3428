package codec_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/vmihailenco/msgpack/v5"
)

// The tests in this file pin what the package doc promises about field
// names ("Field names") and about a stored type that changes shape ("When
// a stored type changes shape"): each case writes a value with the old
// type and reads it with the new one.

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// reshape encodes old with enc and decodes the bytes into a New with dec.
func reshape[Old, New any](t *testing.T, enc codec.Value[Old], dec codec.Value[New], old Old) (New, error) {
	t.Helper()
	data, err := enc.Append(nil, old)
	require.NoError(t, err)
	var v New
	err = dec.Decode(data, &v)
	return v, err
}

// sameCodec returns the codec of New that matches c's kind and naming.
func sameCodec[Old, New any](c codec.Value[Old]) codec.Value[New] {
	switch c := c.(type) {
	case codec.Msgpack[Old]:
		return codec.Msgpack[New](c)
	case codec.JSON[Old]:
		return codec.JSON[New]{}
	}
	panic("unknown codec")
}

func TestFieldNames(t *testing.T) {
	type tagged struct {
		M     int `msgpack:"m" json:"not-used"` // msgpack tag wins
		J     int `json:"j"`
		Plain int
		Omit  int `json:",omitempty"` // a json tag without a name keeps the Go name
		Skip  int `json:"-"`
		Empty int `json:"empty,omitempty"`
	}
	v := tagged{M: 1, J: 2, Plain: 3, Omit: 4, Skip: 5}
	require.Equal(t, []string{"m", "j", "Plain", "Omit"}, storedNames(t, codec.Msgpack[tagged]{}, v),
		`default: msgpack tag, else json tag (with its "-" and omitempty), else the Go name`)
	require.Equal(t, []string{"m", "J", "Plain", "Omit", "Skip", "Empty"}, storedNames(t, codec.Msgpack[tagged]{IgnoreJSONTags: true}, v),
		"IgnoreJSONTags: msgpack tag, else the Go name; json tags change nothing")

	// Nested structs follow the same rule.
	type outer struct {
		In tagged `json:"in"`
	}
	data, err := codec.Msgpack[outer]{}.Append(nil, outer{In: v})
	require.NoError(t, err)
	var m map[string]map[string]int
	require.NoError(t, msgpack.Unmarshal(data, &m))
	require.Equal(t, map[string]map[string]int{"in": {"m": 1, "j": 2, "Plain": 3, "Omit": 4}}, m)
}

// IgnoreJSONTags writes exactly the bytes tipkv wrote before json tags
// were honoured (plain msgpack.Marshal), so stores written then read the
// same with it.
func TestIgnoreJSONTagsIsTheEarlierFormat(t *testing.T) {
	type profile struct {
		Email string   `json:"email"`
		Name  string   `msgpack:"name"`
		Tags  []string `json:"tags,omitempty"`
		Age   int
	}
	v := profile{Email: "ada@example.com", Name: "Ada", Age: 36}
	want, err := msgpack.Marshal(v)
	require.NoError(t, err)
	got, err := codec.Msgpack[profile]{IgnoreJSONTags: true}.Append(nil, v)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Read with the default naming, the json-tagged fields of those bytes
	// come back empty: this is why such a store keeps IgnoreJSONTags.
	var out profile
	require.NoError(t, codec.Msgpack[profile]{}.Decode(got, &out))
	require.Equal(t, profile{Name: "Ada", Age: 36}, out)
	out = profile{}
	require.NoError(t, codec.Msgpack[profile]{IgnoreJSONTags: true}.Decode(got, &out))
	require.Equal(t, v, out)
}

// A field added to the type: values stored before read it as its zero
// value, the other fields as stored.
func TestShapeFieldAdded(t *testing.T) {
	type v1 struct {
		Email string `json:"email"`
	}
	type v2 struct {
		Email string `json:"email"`
		Age   int    `json:"age"`
	}
	for name, c := range valueCodecs[v1]() {
		got, err := reshape(t, c, sameCodec[v1, v2](c), v1{Email: "a@x"})
		require.NoError(t, err, name)
		require.Equal(t, v2{Email: "a@x"}, got, name)
	}
}

// A field removed from the type: its stored value is skipped, silently.
func TestShapeFieldRemoved(t *testing.T) {
	type v1 struct {
		Email string `json:"email"`
		Age   int    `json:"age"`
	}
	type v2 struct {
		Email string `json:"email"`
	}
	for name, c := range valueCodecs[v1]() {
		got, err := reshape(t, c, sameCodec[v1, v2](c), v1{Email: "a@x", Age: 7})
		require.NoError(t, err, name)
		require.Equal(t, v2{Email: "a@x"}, got, name)
	}
}

// A Go field renamed without a tag: the stored value is under the old
// name, so the new field reads as empty, without an error.
func TestShapeFieldRenamedUntagged(t *testing.T) {
	type v1 struct{ Email string }
	type v2 struct{ Mail string }
	for name, c := range valueCodecs[v1]() {
		got, err := reshape(t, c, sameCodec[v1, v2](c), v1{Email: "a@x"})
		require.NoError(t, err, name)
		require.Equal(t, v2{}, got, "%s: the value is lost to the renamed field", name)
	}
}

// A Go field renamed with a tag that keeps the stored name: nothing
// changes on disk, the value reads as before.
func TestShapeFieldRenamedTagged(t *testing.T) {
	type v1 struct {
		Email string `json:"email"`
	}
	type v2 struct {
		Mail string `json:"email"`
	}
	for _, c := range []codec.Value[v1]{codec.Msgpack[v1]{}, codec.JSON[v1]{}} {
		got, err := reshape(t, c, sameCodec[v1, v2](c), v1{Email: "a@x"})
		require.NoError(t, err)
		require.Equal(t, v2{Mail: "a@x"}, got, "%T", c)
	}
	// With IgnoreJSONTags the json tag is not a name: the msgpack tag is.
	type w1 struct {
		Email string `msgpack:"email"`
	}
	type w2 struct {
		Mail string `msgpack:"email"`
	}
	c := codec.Msgpack[w1]{IgnoreJSONTags: true}
	got, err := reshape(t, c, codec.Msgpack[w2]{IgnoreJSONTags: true}, w1{Email: "a@x"})
	require.NoError(t, err)
	require.Equal(t, w2{Mail: "a@x"}, got)
}

// A json tag added to a field stored under its Go name renames it in the
// default msgpack codec: the stored value reads as empty. The JSON codec
// matches names case-insensitively, so "Email" still finds "email" there,
// and IgnoreJSONTags ignores the tag. The msgpack alias option reads both
// names.
func TestShapeTagAdded(t *testing.T) {
	type v1 struct{ Email string }
	type v2 struct {
		Email string `json:"email"`
	}
	old := v1{Email: "a@x"}

	got, err := reshape(t, codec.Msgpack[v1]{}, codec.Msgpack[v2]{}, old)
	require.NoError(t, err)
	require.Equal(t, v2{}, got, "msgpack: names match exactly, so the tag renamed the field")

	got, err = reshape(t, codec.Msgpack[v1]{IgnoreJSONTags: true}, codec.Msgpack[v2]{IgnoreJSONTags: true}, old)
	require.NoError(t, err)
	require.Equal(t, v2{Email: "a@x"}, got, "IgnoreJSONTags: the json tag changes nothing")

	got, err = reshape(t, codec.JSON[v1]{}, codec.JSON[v2]{}, old)
	require.NoError(t, err)
	require.Equal(t, v2{Email: "a@x"}, got, "json: names match case-insensitively")

	type v3 struct {
		Email string `msgpack:"email,alias:Email" json:"email"`
	}
	for _, data := range []any{old, v2{Email: "a@x"}} {
		b, err := msgpack.Marshal(data)
		require.NoError(t, err)
		var out v3
		require.NoError(t, codec.Msgpack[v3]{}.Decode(b, &out))
		require.Equal(t, v3{Email: "a@x"}, out, "the alias reads the old name and the new one: %T", data)
	}
	b, err := codec.Msgpack[v3]{}.Append(nil, v3{Email: "a@x"})
	require.NoError(t, err)
	var out map[string]string
	require.NoError(t, msgpack.Unmarshal(b, &out))
	require.Equal(t, map[string]string{"email": "a@x"}, out, "and writes the new one")
}

// A field whose type changes: a value that converts without loss reads
// (an integer into a wider integer or a float); one that does not is
// ErrCorrupt, never a silent zero.
func TestShapeFieldTypeChanged(t *testing.T) {
	type v1 struct {
		N int32 `json:"n"`
	}
	type wider struct {
		N int64 `json:"n"`
	}
	type float struct {
		N float64 `json:"n"`
	}
	type text struct {
		N string `json:"n"`
	}
	for name, c := range valueCodecs[v1]() {
		w, err := reshape(t, c, sameCodec[v1, wider](c), v1{N: 7})
		require.NoError(t, err, name)
		require.Equal(t, wider{N: 7}, w, name)
		f, err := reshape(t, c, sameCodec[v1, float](c), v1{N: 7})
		require.NoError(t, err, name)
		require.Equal(t, float{N: 7}, f, name)
		_, err = reshape(t, c, sameCodec[v1, text](c), v1{N: 7})
		require.ErrorIs(t, err, codec.ErrCorrupt, name)
	}
}
