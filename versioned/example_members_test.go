package versioned_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// Two replicas of a service join one consumer group: the first to
// Acquire moves the cursor, the other stands by and cannot; when the
// first's lease runs out (here: a clock moved past it), the standby takes
// the group over in the next epoch, resumes at the cursor, and the old
// member's Advance is refused.
func ExampleMember() {
	db := openExample()
	defer db.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	feed, err := versioned.NewFeed[string](db, nil)
	if err != nil {
		log.Fatal(err)
	}
	var ps []int64
	for _, e := range []string{"a", "b", "c"} {
		p, err := feed.Append(db, "orders", e)
		if err != nil {
			log.Fatal(err)
		}
		ps = append(ps, p)
	}
	opts := &versioned.MemberOptions{Lease: 10 * time.Second, Clock: clock}
	one, _ := feed.Join("orders", "billing", "replica-1", opts)
	two, _ := feed.Join("orders", "billing", "replica-2", opts)

	ok, _ := one.Acquire()
	fmt.Println("replica-1 holds the group:", ok, "epoch", one.Epoch())
	ok, _ = two.Acquire()
	fmt.Println("replica-2 holds the group:", ok)
	fmt.Println("replica-1 advances:", one.Advance(db, ps[0]))

	now = now.Add(11 * time.Second) // replica-1 stopped renewing
	ok, _ = two.Acquire()
	fmt.Println("replica-2 holds the group:", ok, "epoch", two.Epoch(), "at the first event:", two.Position() == ps[0])
	err = one.Advance(db, ps[1])
	fmt.Println("replica-1 lost the group:", errors.Is(err, tipkv.ErrLeaseLost))
	fmt.Println("replica-2 advances:", two.Advance(db, ps[1]))
	// Output:
	// replica-1 holds the group: true epoch 1
	// replica-2 holds the group: false
	// replica-1 advances: <nil>
	// replica-2 holds the group: true epoch 2 at the first event: true
	// replica-1 lost the group: true
	// replica-2 advances: <nil>
}
