package tipkv_test

import (
	"encoding/json"
	"fmt"
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

// No module imports another module's internal packages: the side modules
// (etcdkv, sqlkv, metrics, bench, ...) build on the core's exported
// packages only, as an engine or exporter outside this repository must.
// Go's own rule does not catch it: it lets any package under
// github.com/tipkv/tipkv import github.com/tipkv/tipkv/internal/..., in
// whichever module. It reads every module of the workspace (go.work) with
// `go list`, tests included; without a go.work, the core module alone.
func TestModulesImportNoOtherModulesInternals(t *testing.T) {
	dirs := []string{"."}
	if out, err := exec.Command("go", "work", "edit", "-json").Output(); err == nil {
		var w struct{ Use []struct{ DiskPath string } }
		require.NoError(t, json.Unmarshal(out, &w))
		dirs = dirs[:0]
		for _, u := range w.Use {
			dirs = append(dirs, u.DiskPath)
		}
	}
	// The module of every directory, to tell which module owns an import.
	modules := map[string]string{} // module path -> directory
	for _, d := range dirs {
		cmd := exec.Command("go", "mod", "edit", "-json")
		cmd.Dir = d
		out, err := cmd.Output()
		require.NoError(t, err, "go mod edit -json in %s", d)
		var mod struct{ Module struct{ Path string } }
		require.NoError(t, json.Unmarshal(out, &mod))
		modules[mod.Module.Path] = d
	}
	owner := func(pkg string) string {
		best := ""
		for m := range modules {
			if (pkg == m || strings.HasPrefix(pkg, m+"/")) && len(m) > len(best) {
				best = m
			}
		}
		return best
	}
	checked := 0
	for m, d := range modules {
		out, err := goList(d, "-f", `{{.ImportPath}}:{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
		require.NoError(t, err, "go list in %s", d)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			pkg, imports, _ := strings.Cut(line, ":")
			for _, imp := range strings.Fields(imports) {
				if o := owner(imp); o != "" && o != m && isInternal(imp) {
					t.Errorf("%s (module %s) imports %s, an internal package of module %s", pkg, m, imp, o)
				}
			}
			checked++
		}
	}
	require.Greater(t, checked, 5, "go list found the modules' packages")
}

func isInternal(pkg string) bool {
	return strings.HasSuffix(pkg, "/internal") || strings.Contains(pkg, "/internal/")
}

func goList(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return "", fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return string(out), err
}
