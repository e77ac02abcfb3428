package etcdkv

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// parseOps reads ops written as "set k=v", "del k", "delr lo hi"; `\0` in
// a key is a zero byte.
func parseOps(t *testing.T, lines []string) []op {
	t.Helper()
	var ops []op
	for _, l := range lines {
		l = strings.ReplaceAll(l, `\0`, "\x00")
		f := strings.Fields(l)
		switch {
		case f[0] == "set" && len(f) == 2:
			k, v, _ := strings.Cut(f[1], "=")
			ops = append(ops, op{kind: opSet, key: []byte(k), value: []byte(v)})
		case f[0] == "del" && len(f) == 2:
			ops = append(ops, op{kind: opDelete, key: []byte(f[1])})
		case f[0] == "delr" && len(f) == 3:
			ops = append(ops, op{kind: opDeleteRange, key: []byte(f[1]), end: []byte(f[2])})
		default:
			t.Fatalf("bad op %q", l)
		}
	}
	return ops
}

func formatOps(ops []op) []string {
	out := []string{}
	for _, o := range ops {
		var s string
		switch o.kind {
		case opSet:
			s = fmt.Sprintf("set %s=%s", o.key, o.value)
		case opDelete:
			s = fmt.Sprintf("del %s", o.key)
		case opDeleteRange:
			s = fmt.Sprintf("delr %s %s", o.key, o.end)
		}
		out = append(out, strings.ReplaceAll(s, "\x00", `\0`))
	}
	return out
}

func TestNormalize(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		{"nothing", nil, []string{}},
		{"sets sorted", []string{"set b=1", "set a=2"}, []string{"set a=2", "set b=1"}},
		{"the last set wins", []string{"set a=1", "set a=2"}, []string{"set a=2"}},
		{"a delete after a set deletes", []string{"set a=1", "del a"}, []string{"del a"}},
		{"a set after a delete survives", []string{"del a", "set a=1"}, []string{"set a=1"}},
		{"double delete", []string{"del a", "del a"}, []string{"del a"}},
		{"a delete inside a range is dropped", []string{"delr a c", "del b"}, []string{"delr a c"}},
		{"a range covering a delete swallows it", []string{"del b", "delr a c"}, []string{"delr a c"}},
		{"a range over a set removes it", []string{"set b=1", "delr a c"}, []string{"delr a c"}},
		{"a set inside a range splits it", []string{"delr a d", "set b=1"}, []string{"delr a b", "delr b\\0 d", "set b=1"}},
		{"a set at a range's start", []string{"delr a d", "set a=1"}, []string{"delr a\\0 d", "set a=1"}},
		{"a set just before a range's end", []string{"delr a c\\0", "set c=1"}, []string{"delr a c", "set c=1"}},
		{"a set at a range's end is outside it", []string{"delr a c", "set c=1"}, []string{"delr a c", "set c=1"}},
		{"a split leaving one key is a point delete", []string{"delr a b\\0", "set a\\0=1"}, []string{"del a", "delr a\\0\\0 b\\0", "set a\\0=1"}},
		{"a set filling a one-key range removes it", []string{"del a", "delr a a\\0", "set a=1"}, []string{"set a=1"}},
		{"overlapping ranges merge", []string{"delr a c", "delr b d"}, []string{"delr a d"}},
		{"adjacent ranges merge", []string{"delr a b", "delr b c"}, []string{"delr a c"}},
		{"a range and the point at its end merge", []string{"delr a b", "del b"}, []string{"delr a b\\0"}},
		{"disjoint ranges stay apart", []string{"delr c d", "delr a b"}, []string{"delr a b", "delr c d"}},
		{"an empty range is dropped", []string{"delr b b", "delr c a"}, []string{}},
		{"a range bridging two merges all", []string{"delr a b", "delr c d", "delr b c"}, []string{"delr a d"}},
		{"sets split merged ranges", []string{"delr a c", "set b=1", "delr b e", "set d=2"}, []string{"delr a d", "delr d\\0 e", "set d=2"}},
		{"a set between a range and its re-delete", []string{"delr a e", "set b=1", "del b"}, []string{"delr a e"}},
		{"the store conformance batch", []string{
			"set 5=a", "set 5=b", "set 6=x", "del 6", "del 7", "set 7=y", "delr 1 4", "set 2=back",
			"delr 2 3", "set 3=three", "delr 8 :", "delr 8 :", "del 9",
		}, []string{"delr 1 3", "delr 3\\0 4", "del 6", "delr 8 :", "set 3=three", "set 5=b", "set 7=y"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := formatOps(normalize(parseOps(t, tc.in)))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("normalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// fuzzKeys are the keys fuzzed ops name: neighbours in byte order,
// including successors ("a" < "a\x00" < "a\x00\x00" < "a\x01"), so that
// splits and point deletes meet their edges.
var fuzzKeys = []string{"a", "a\x00", "a\x00\x00", "a\x01", "b", "b\x00", "c", "d", "e", "f"}

// decodeOps turns fuzz bytes into ops, three bytes an op.
func decodeOps(data []byte) []op {
	var ops []op
	for i := 0; i+2 < len(data); i += 3 {
		k1 := []byte(fuzzKeys[int(data[i+1])%len(fuzzKeys)])
		k2 := []byte(fuzzKeys[int(data[i+2])%len(fuzzKeys)])
		switch data[i] % 3 {
		case 0:
			ops = append(ops, op{kind: opSet, key: k1, value: []byte{data[i+2]}})
		case 1:
			ops = append(ops, op{kind: opDelete, key: k1})
		case 2:
			ops = append(ops, op{kind: opDeleteRange, key: k1, end: k2})
		}
	}
	return ops
}

// applyOps applies ops in order to a model of the store. Keys outside the
// alphabet do not exist: the model's state holds only alphabet keys, plus
// any key a set wrote.
func applyOps(state map[string]string, ops []op) {
	for _, o := range ops {
		switch o.kind {
		case opSet:
			state[string(o.key)] = string(o.value)
		case opDelete:
			delete(state, string(o.key))
		case opDeleteRange:
			for k := range state {
				if k >= string(o.key) && k < string(o.end) {
					delete(state, k)
				}
			}
		}
	}
}

// checkValid checks what etcd asks of one txn: no key put twice, no key
// both put and deleted, no put inside a deleted range; and what the
// normaliser promises on top: no empty range, deletes disjoint.
func checkValid(t *testing.T, ops []op) {
	t.Helper()
	puts := map[string]bool{}
	var dels []span
	for _, o := range ops {
		switch o.kind {
		case opSet:
			if puts[string(o.key)] {
				t.Fatalf("key %q put twice in %q", o.key, formatOps(ops))
			}
			puts[string(o.key)] = true
		case opDelete:
			dels = append(dels, span{o.key, successor(o.key)})
		case opDeleteRange:
			if bytes.Compare(o.key, o.end) >= 0 {
				t.Fatalf("empty range in %q", formatOps(ops))
			}
			if isSuccessor(o.key, o.end) {
				t.Fatalf("a one-key range is not a point delete in %q", formatOps(ops))
			}
			dels = append(dels, span{o.key, o.end})
		}
	}
	for i, d := range dels {
		for k := range puts {
			if k >= string(d.lo) && k < string(d.hi) {
				t.Fatalf("put %q inside deleted [%q, %q) in %q", k, d.lo, d.hi, formatOps(ops))
			}
		}
		for _, e := range dels[i+1:] {
			if bytes.Compare(d.lo, e.hi) < 0 && bytes.Compare(e.lo, d.hi) < 0 {
				t.Fatalf("deletes overlap in %q", formatOps(ops))
			}
		}
	}
}

// FuzzNormalize checks the normaliser against a model: ops applied in
// order leave the same state as their normalised form, which etcd accepts.
// The seed corpus is in testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte{2, 0, 6, 0, 4, 1})          // a range, a set inside it
	f.Add([]byte{0, 1, 9, 1, 1, 0, 0, 1, 8}) // set, delete, set of one key
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := decodeOps(data)
		want := map[string]string{}
		for _, k := range fuzzKeys {
			want[k] = "init"
		}
		got := maps.Clone(want)
		applyOps(want, ops)
		norm := normalize(ops)
		checkValid(t, norm)
		applyOps(got, norm)
		if !maps.Equal(got, want) {
			t.Fatalf("ops %q\nnormalised %q\nleave %q, want %q", formatOps(ops), formatOps(norm), got, want)
		}
		if len(norm) > 2*len(ops)+1 {
			t.Fatalf("%d ops normalised to %d", len(ops), len(norm))
		}
	})
}
