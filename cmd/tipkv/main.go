// Command tipkv inspects and maintains a tipkv store without writing Go:
// a Pebble directory, a store of PostgreSQL (a DSN: postgres://...) or one
// of etcd (etcd://host:port[,host:port...][/namespace]). Package
// github.com/tipkv/tipkv/cli is the command; this module adds the shared
// engines, so that importers of the core do not build them. Run
// "tipkv help" for the commands.
package main

import (
	"os"

	"github.com/tipkv/tipkv/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, &cli.Options{Engines: engines()}))
}
