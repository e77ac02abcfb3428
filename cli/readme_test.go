package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's command line session, run as written against the store
// examples/shop writes, prints what the README shows (times of day and
// runs of spaces aside: they depend on when it runs).
func TestREADMESession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run ./examples/shop")
	}
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	const first = "$ go run ./examples/shop shop\n"
	i := strings.Index(string(readme), first)
	require.NotEqual(t, -1, i, "the README has the session")
	session := string(readme[i:])
	session = session[:strings.Index(session, "\n```")]

	dir := filepath.Join(t.TempDir(), "shop")
	build := exec.Command("go", "run", "./examples/shop", dir)
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "wrote a shop store in "+dir+"\n", string(out))

	clock := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z`)
	normal := func(s string) string {
		s = clock.ReplaceAllString(s, "TIME")
		return regexp.MustCompile(` +`).ReplaceAllString(s, " ")
	}
	steps := strings.Split(session, "\n$ ")[1:]
	require.NotEmpty(t, steps)
	for _, step := range steps {
		line, want, _ := strings.Cut(step, "\n")
		args := strings.Fields(line)
		require.Equal(t, "tipkv", args[0], "every step after the first runs tipkv: %q", line)
		for j, a := range args {
			if a == "shop" {
				args[j] = dir
			}
		}
		got := cliOK(t, args[1:]...)
		require.Equal(t, normal(want+"\n"), normal(got), "$ %s", line)
	}
}

// Every Go code block of the READMEs is type-checked against the code, so
// that a snippet that stops compiling (a renamed option, a changed
// signature) fails here rather than misleads a reader.
//
// A block is a fragment: it is compiled as the body of a function that
// returns an error, in a file that declares what the README's examples
// have in scope (snippetPrelude: db, ctx, dir, err, users, feed, jobs,
// orders, outbox and the types they hold) and imports context, errors,
// fmt, log, os, path/filepath, time and tipkv's packages. Whatever else a
// block needs is declared in an HTML comment on the line before it, which
// a Markdown reader does not show:
//
//	<!-- snippet: module metrics; import "go.opentelemetry.io/otel"; var last int64 -->
//
// Items are separated by semicolons: "module M" compiles the block in the
// nested module M (its dependencies, not the core's); an import adds one;
// a "type" declaration goes to the file, anything else (var) to the top of
// the function. Lines of the block that start with import are moved to
// the file's imports. "{ ... }", the README's "and so on", is read as an
// empty block. Unused variables and imports are allowed: a fragment
// declares what it shows.
func TestREADMESnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the export data of tipkv's modules with go list")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var all []snippet
	for _, f := range readmes {
		b, err := os.ReadFile(filepath.Join(root, f.file))
		require.NoError(t, err)
		ss, err := readmeSnippets(f.file, f.module, string(b))
		require.NoError(t, err)
		require.NotEmpty(t, ss, f.file)
		all = append(all, ss...)
	}
	byModule := map[string][]snippet{}
	for _, s := range all {
		byModule[s.module] = append(byModule[s.module], s)
	}
	for module, ss := range byModule {
		imports := slices.Clone(snippetImports)
		for _, s := range ss {
			imports = append(imports, s.imports...)
		}
		exports := exportData(t, filepath.Join(root, module), imports)
		for _, s := range ss {
			t.Run(fmt.Sprintf("%s:%d", s.file, s.line), func(t *testing.T) {
				if errs := s.check(exports); len(errs) > 0 {
					t.Errorf("the snippet does not compile:\n%s\n--- as compiled:\n%s", strings.Join(errs, "\n"), s.source())
				}
			})
		}
	}
}

// readmes are the READMEs whose code is checked, with the module (a
// directory under the repository's root) their code belongs to.
var readmes = []struct{ file, module string }{
	{"README.md", ""},
	{"sqlkv/README.md", "sqlkv"},
	{"etcdkv/README.md", "etcdkv"},
	{"examples/memengine/README.md", "examples/memengine"},
}

// snippetImports are imported by every snippet's file.
var snippetImports = []string{
	`"context"`, `"errors"`, `"fmt"`, `"log"`, `"os"`, `"path/filepath"`, `"time"`,
	`"github.com/tipkv/tipkv"`, `"github.com/tipkv/tipkv/codec"`,
	`"github.com/tipkv/tipkv/queue"`, `"github.com/tipkv/tipkv/versioned"`,
}

// snippetPrelude is what the README's examples have in scope.
const snippetPrelude = `
type (
	Profile     struct{ Email string }
	User        struct{ Name string }
	Click       struct{ Page string }
	Job         struct{ ID int }
	Order       struct{ Total int }
	OrderPlaced struct {
		ID      string
		Version int64
	}
	Page    struct{ Title string }
	Session struct{ User string }
)

var (
	db     *tipkv.DB
	ctx    context.Context
	dir    string
	err    error
	users  *versioned.Collection[User]
	feed   *versioned.Feed[Click]
	jobs   *queue.Queue[Job]
	orders *versioned.Collection[Order]
	outbox *queue.Queue[OrderPlaced]
)
`

// A snippet is one go block of a README.
type snippet struct {
	file, module string
	line         int      // of the block's first line in file
	imports      []string // `"path"` or `name "path"`
	types, vars  []string
	body         string
}

var (
	markerRE   = regexp.MustCompile(`^<!--\s*snippet:(.*)-->$`)
	importRE   = regexp.MustCompile(`^import\s+(?:([A-Za-z_][A-Za-z0-9_]*)\s+)?("[^"]+")$`)
	ellipsisRE = regexp.MustCompile(`\{\s*\.\.\.\s*\}`)
)

// readmeSnippets returns the go blocks of a Markdown file.
func readmeSnippets(file, module, md string) ([]snippet, error) {
	var out []snippet
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		s := snippet{file: file, module: module, line: i + 2}
		var imports []string
		if i > 0 {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				for _, item := range strings.Split(m[1], ";") {
					item = strings.TrimSpace(item)
					switch {
					case item == "":
					case strings.HasPrefix(item, "module "):
						s.module = strings.TrimSpace(strings.TrimPrefix(item, "module "))
					case strings.HasPrefix(item, "import "):
						imports = append(imports, item)
					case strings.HasPrefix(item, "type "):
						s.types = append(s.types, item)
					default:
						s.vars = append(s.vars, item)
					}
				}
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			if importRE.MatchString(strings.TrimSpace(lines[i])) {
				imports = append(imports, strings.TrimSpace(lines[i]))
				body = append(body, "") // keep the line numbers
				continue
			}
			body = append(body, ellipsisRE.ReplaceAllString(lines[i], "{ /* ... */ }"))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: a go block that does not end", file, s.line-1)
		}
		s.body = strings.Join(body, "\n")
		for _, imp := range imports {
			m := importRE.FindStringSubmatch(imp)
			if m == nil {
				return nil, fmt.Errorf("%s:%d: bad import %q", file, s.line-1, imp)
			}
			s.imports = append(s.imports, strings.TrimSpace(m[1]+" "+m[2]))
		}
		out = append(out, s)
	}
	return out, nil
}

// source is the file the snippet is compiled as; a line directive maps
// the body's lines to the README's.
func (s snippet) source() string {
	var b strings.Builder
	b.WriteString("package snippet\n\nimport (\n")
	for _, p := range append(slices.Clone(snippetImports), s.imports...) {
		fmt.Fprintf(&b, "\t%s\n", p)
	}
	b.WriteString(")\n")
	b.WriteString(snippetPrelude)
	for _, d := range s.types {
		b.WriteString(d + "\n")
	}
	b.WriteString("\nfunc _() error {\n")
	for _, d := range s.vars {
		b.WriteString("\t" + d + "\n")
	}
	fmt.Fprintf(&b, "//line %s:%d\n%s\n", s.file, s.line, s.body)
	b.WriteString("\treturn nil\n}\n")
	return b.String()
}

// check type-checks the snippet and returns its errors, but those about
// unused variables and imports (go/types' soft errors).
func (s snippet) check(exports map[string]string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", s.source(), parser.SkipObjectResolution)
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	conf := types.Config{
		Importer: exportImporter(fset, exports),
		Error: func(err error) {
			if te, ok := err.(types.Error); ok && te.Soft {
				return
			}
			errs = append(errs, err.Error())
		},
	}
	_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
	return errs
}

// exportData builds (go list -export) the packages of imports (each
// `"path"` or `name "path"`) in the module in dir, and everything they
// depend on, and returns the files of their export data by import path.
func exportData(t *testing.T, dir string, imports []string) map[string]string {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	seen := map[string]bool{}
	for _, imp := range imports {
		fields := strings.Fields(imp)
		p, err := strconv.Unquote(fields[len(fields)-1])
		require.NoError(t, err, imp)
		if !seen[p] {
			seen[p] = true
			args = append(args, p)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list in %s: %s", dir, stderr.String())
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	require.NoError(t, sc.Err())
	return exports
}

// exportImporter imports packages from the export data exportData found.
func exportImporter(fset *token.FileSet, exports map[string]string) types.Importer {
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s: not a dependency of the module (a snippet marker's module item?)", path)
		}
		return os.Open(file)
	})
}

// refRE finds a reference to an exported name of tipkv's packages in a
// Markdown code span: `versioned.Options.MissFilter`, `queue.Queue[T]`,
// `sqlkv.Config.PollInterval`, `tipkv.Open(dir, nil)` (the name chain is
// checked, not what follows it).
var refRE = regexp.MustCompile("`(tipkv|versioned|queue|codec|engine|sqlkv|etcdkv|console|cli)\\.([A-Z][A-Za-z0-9]*)(?:\\[[^\\]`]*\\])?((?:\\.[A-Z][A-Za-z0-9]*)*)")

// refPackages are the packages refRE names: their module (a directory
// under the repository's root) and import path.
var refPackages = map[string]struct{ module, path string }{
	"tipkv":     {"", "github.com/tipkv/tipkv"},
	"versioned": {"", "github.com/tipkv/tipkv/versioned"},
	"queue":     {"", "github.com/tipkv/tipkv/queue"},
	"codec":     {"", "github.com/tipkv/tipkv/codec"},
	"engine":    {"", "github.com/tipkv/tipkv/engine"},
	"console":   {"", "github.com/tipkv/tipkv/console"},
	"cli":       {"", "github.com/tipkv/tipkv/cli"},
	"sqlkv":     {"sqlkv", "github.com/tipkv/tipkv/sqlkv"},
	"etcdkv":    {"etcdkv", "github.com/tipkv/tipkv/etcdkv"},
}

// Every qualified name the READMEs put in a code span exists: the
// package's name, and each field or method after it. A reference that
// drifted from the code (an option that moved to another package's
// Options, a renamed method) fails here.
func TestREADMEReferences(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the export data of tipkv's modules with go list")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	type ref struct {
		where, qual, name string
		sels              []string
	}
	byModule := map[string][]ref{}
	for _, f := range readmes {
		b, err := os.ReadFile(filepath.Join(root, f.file))
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range refRE.FindAllStringSubmatch(line, -1) {
				r := ref{where: fmt.Sprintf("%s:%d: %s", f.file, i+1, strings.TrimPrefix(m[0], "`")), qual: m[1], name: m[2]}
				if m[3] != "" {
					r.sels = strings.Split(m[3][1:], ".")
				}
				mod := refPackages[r.qual].module
				byModule[mod] = append(byModule[mod], r)
			}
		}
	}
	require.NotEmpty(t, byModule[""])
	for module, refs := range byModule {
		var paths []string
		for _, r := range refs {
			paths = append(paths, strconv.Quote(refPackages[r.qual].path))
		}
		imp := exportImporter(token.NewFileSet(), exportData(t, filepath.Join(root, module), paths))
		for _, r := range refs {
			pkg, err := imp.Import(refPackages[r.qual].path)
			require.NoError(t, err)
			obj := pkg.Scope().Lookup(r.name)
			if obj == nil || !obj.Exported() {
				t.Errorf("%s: %s has no %s", r.where, pkg.Path(), r.name)
				continue
			}
			for _, sel := range r.sels {
				found, _, _ := types.LookupFieldOrMethod(obj.Type(), true, pkg, sel)
				if found == nil {
					t.Errorf("%s: %s has no field or method %s", r.where, obj.Name(), sel)
					break
				}
				obj = found
			}
		}
	}
}
