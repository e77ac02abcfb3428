package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/tipkv/tipkv"
)

// modulePath is the module tipkv is built from.
const modulePath = "github.com/tipkv/tipkv"

// oldestFormat is the oldest store format this binary reads (a store of an
// older format is upgraded when a command opens it for writing).
const oldestFormat = 1

var versionCommand = &command{
	name:    "version",
	summary: "print the tipkv version and the store formats it reads",
	help: `
Prints the version of the tipkv module this binary was built from, the
store format it writes and the oldest it reads, the Go version that built
it and, when the build recorded it, the source revision.

The module version is "(devel)" for a binary built inside a clone that Go
could not stamp from version control, and a pseudo-version such as
v0.0.0-20260101120000-abcdef123456 when it could; "go install
github.com/tipkv/tipkv/cmd/tipkv@v1.2.3" gives v1.2.3.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		return func(c *ctx, _ []string) int { return version(c) }
	},
}

// buildVersion is what version reports.
type buildVersion struct {
	module, version      string
	goVersion, platform  string
	revision, revTime    string
	modified, hasVCSInfo bool
}

// readBuildVersion reads the build information of the running binary.
func readBuildVersion() buildVersion {
	v := buildVersion{module: modulePath, version: "(unknown)", goVersion: runtime.Version(), platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.goVersion = info.GoVersion
	if info.Main.Path == modulePath {
		v.version = info.Main.Version
	} else {
		for _, d := range info.Deps {
			if d.Path == modulePath {
				v.version = d.Version
				if d.Replace != nil {
					v.version += " => " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
	}
	if v.version == "" {
		v.version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision, v.hasVCSInfo = s.Value, true
		case "vcs.time":
			v.revTime = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

func version(c *ctx) int {
	v := readBuildVersion()
	return c.show(&v)
}

func (v *buildVersion) json() object {
	obj := object{
		{"module", v.module}, {"version", v.version},
		{"format", tipkv.FormatVersion}, {"oldest_format", oldestFormat},
		{"go", v.goVersion}, {"platform", v.platform},
	}
	if v.hasVCSInfo {
		obj = append(obj, field{"revision", v.revision}, field{"revision_time", v.revTime}, field{"modified", v.modified})
	}
	return obj
}

func (v *buildVersion) table(w io.Writer) error {
	t := newTable(w)
	t.row("tipkv", v.version, v.module)
	t.row("format", tipkv.FormatVersion, fmt.Sprintf("store format it writes; it reads formats %d to %d", oldestFormat, tipkv.FormatVersion))
	t.row("go", v.goVersion, v.platform)
	if v.hasVCSInfo {
		rev := v.revTime
		if v.modified {
			rev += ", with local changes"
		}
		t.row("revision", v.revision, rev)
	}
	return t.flush()
}
