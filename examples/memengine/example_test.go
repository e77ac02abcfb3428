package memengine_test

import (
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/examples/memengine"
	"github.com/tipkv/tipkv/versioned"
)

type profile struct {
	Email string `msgpack:"email"`
}

// A DB on the engine: tipkv.OpenEngine takes any engine.Store. The keys
// outlive the DB in the Memory, which opens again.
func Example() {
	mem := memengine.New()
	s, err := mem.Open(nil)
	if err != nil {
		panic(err)
	}
	db, err := tipkv.OpenEngine(s, "memory", nil)
	if err != nil {
		panic(err)
	}
	profiles, _ := versioned.NewCollection[profile](db, "profiles", nil)
	_, _ = profiles.Put(db, "ada", profile{Email: "ada@example.com"})
	_, _ = profiles.Put(db, "ada", profile{Email: "ada@example.org"})
	_ = db.Close() // closes s

	s, _ = mem.Open(nil)
	db, _ = tipkv.OpenEngine(s, "memory", nil)
	defer db.Close()
	profiles, _ = versioned.NewCollection[profile](db, "profiles", nil)
	latest, _ := profiles.Latest("ada")
	fmt.Println(latest.Version, latest.Value.Email)
	// Output: 2 ada@example.org
}
