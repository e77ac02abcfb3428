package tipkv_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// An online backup: Checkpoint copies the store while it is in use, and
// the copy opens as a store of its own.
func ExampleDB_Checkpoint() {
	dir, err := os.MkdirTemp("", "tipkv-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := tipkv.Open(filepath.Join(dir, "live"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := orders.Put(db, "order-17", Order{Status: "placed"}); err != nil {
		log.Fatal(err)
	}

	backup := filepath.Join(dir, "backup-1")
	if err := db.Checkpoint(backup); err != nil {
		log.Fatal(err)
	}
	if _, err := orders.Put(db, "order-17", Order{Status: "paid"}); err != nil {
		log.Fatal(err) // the live store goes on; the copy keeps version 1
	}

	cp, err := tipkv.Open(backup, &tipkv.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer cp.Close()
	copied, err := versioned.NewCollection[Order](cp, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	doc, err := copied.Latest("order-17")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("in the backup: version %d, %s\n", doc.Version, doc.Value.Status)
	// Output:
	// in the backup: version 1, placed
}

// Metrics gives the figures a dashboard polls; the module
// github.com/tipkv/tipkv/metrics exports them to Prometheus and
// OpenTelemetry.
func ExampleDB_Metrics() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	m, err := db.Metrics()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("engine:", m.Engine)
	fmt.Println("levels:", len(m.Storage.Levels))
	fmt.Println("write stalls:", m.Storage.WriteStalls)
	fmt.Printf("cache hit rate: %.2f\n", m.Storage.CacheHitRate())
	// Output:
	// engine: pebble
	// levels: 7
	// write stalls: 0
	// cache hit rate: 0.00
}
