package tipkv_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// engines are the import paths of storage engines and their clients.
var engines = []string{
	"github.com/cockroachdb/pebble",
	"go.etcd.io/",
	"github.com/jackc/pgx",
	"github.com/dgraph-io/badger",
}

// storePackages are the only packages of this module that may import an
// engine: the implementations of the storage contract.
var storePackages = []string{
	"github.com/tipkv/tipkv/internal/pebblestore",
}

// Engines sit behind the storage contract: versioned/ and queue/ (and the
// contract itself) never import an engine or an engine's store package, and
// only the store packages import an engine at all. It reads the module's
// import graph with `go list`, as Pebble's own lint test does.
func TestEnginesStayBehindTheContract(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./...").Output()
	require.NoError(t, err, "go list")
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		isStore := false
		for _, s := range storePackages {
			isStore = isStore || pkg == s
		}
		neutral := strings.HasPrefix(pkg, "github.com/tipkv/tipkv/versioned") ||
			strings.HasPrefix(pkg, "github.com/tipkv/tipkv/queue") ||
			pkg == "github.com/tipkv/tipkv/engine" ||
			pkg == "github.com/tipkv/tipkv/codec"
		for _, imp := range strings.Fields(imports) {
			for _, e := range engines {
				if strings.HasPrefix(imp, e) {
					require.True(t, isStore, "%s imports the engine %s: only %v may", pkg, imp, storePackages)
				}
			}
			if neutral {
				for _, s := range storePackages {
					require.NotEqual(t, s, imp, "%s imports the store package %s: it must speak to the engine contract only", pkg, imp)
				}
			}
		}
		checked++
	}
	require.Greater(t, checked, 5, "go list found the module's packages")

	// The contract itself depends on no engine, even indirectly.
	out, err = exec.Command("go", "list", "-deps", "github.com/tipkv/tipkv/engine").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, e := range engines {
			require.False(t, strings.HasPrefix(dep, e), "engine depends on %s", dep)
		}
	}
}
