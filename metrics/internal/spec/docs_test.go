package spec_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/metrics/internal/spec"
)

// Metric names in prose: a Prometheus name (tipkv_cache_hits_total, or a
// family as tipkv_retention_*) not inside a longer identifier, and an
// OpenTelemetry name (tipkv.cache.hits) in backticks or quotes.
var (
	promName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_/.])(tipkv_[a-z0-9_]+\*?)`)
	otelName = regexp.MustCompile("[`\"](tipkv(?:\\.[a-z0-9_]+)+)[`\"]")
)

// notMetrics are names of that shape that are not metrics.
var notMetrics = map[string]bool{
	"tipkv.v1": true, // the Pebble comparer's name
}

// Every metric name that tipkv's documentation mentions exists: the
// README, BENCHMARKS and every Markdown and Go file of the root module
// (which documents DB.Metrics) and of this one. A metric renamed or
// removed from All, or a name mistyped in a doc, fails here. (The
// changelog is history and may name metrics that are gone.)
func TestDocumentedMetricsExist(t *testing.T) {
	known := map[string]bool{}
	for _, m := range spec.All {
		known[m.Prom], known[m.Name] = true, true
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// Other modules (sqlkv, etcdkv, bench) document no metrics of
			// tipkv's; this module is checked.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root && rel != "metrics" {
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case rel == "CHANGELOG.md", rel == filepath.Join("metrics", "internal", "spec", "spec.go"):
			return nil
		case strings.HasSuffix(path, ".md"), strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			var names []string
			for _, m := range promName.FindAllStringSubmatch(line, -1) {
				names = append(names, m[1])
			}
			for _, m := range otelName.FindAllStringSubmatch(line, -1) {
				names = append(names, m[1])
			}
			for _, n := range names {
				if notMetrics[n] {
					continue
				}
				if prefix, ok := strings.CutSuffix(n, "*"); ok {
					require.True(t, hasPrefix(known, prefix), "%s:%d: no metric is named %s", rel, i+1, n)
					continue
				}
				require.True(t, known[n], "%s:%d: %s is not a metric (metrics/internal/spec.All)", rel, i+1, n)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 50, "the walk found the repository's files")
}

func hasPrefix(names map[string]bool, prefix string) bool {
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
