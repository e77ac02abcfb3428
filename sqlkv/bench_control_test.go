package sqlkv_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// op=deliver: the batch of a shared delivery of one message (the item
// required as read and rewritten with its lease) with the condition on
// the queue's control key that every shared Receive carries (queue's
// requireControl). control=present,vs=none: the key present (as after a
// queue's first delivery, which creates it) against the same batch
// without the condition, what the condition costs a Receive.
// control=absent,vs=present: the condition on an absent key (what every
// delivery would pay if the key were never created) against a present
// one. On PostgreSQL
// a present key's condition is a FOR KEY SHARE read of its row, which
// concurrent deliveries share; an absent key's is a placeholder row the
// commit inserts, which every concurrent delivery of the queue waits for.
// procs deliveries run at once (each on messages of its own); a call's
// time is the round's.
//
// The batch is built on the store, not by queue.Receive: the absent
// case cannot be made through the queue, which creates the key.
//
//	go test -run '^$' -bench DeliveryControl -benchtime 2000x -count 3 .
func BenchmarkDeliveryControl(b *testing.B) {
	const perProc = 64 // messages each deliverer cycles over
	for _, procs := range []int{1, 4} {
		for _, c := range []struct{ control, vs string }{{"present", "none"}, {"absent", "present"}} {
			b.Run(fmt.Sprintf("op=deliver,control=%s,vs=%s,procs=%d", c.control, c.vs, procs), func(b *testing.B) {
				s, _ := benchStore(b)
				present := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueControl), "q")
				absent := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueControl), "other")
				ctl := []byte{0x01, 0x00}
				mustSet(b, s, present, ctl)
				items := make([][][]byte, procs) // keys
				vals := make([][][]byte, procs)  // each item's value as the deliverer last wrote it
				for p := range procs {
					for m := range perProc {
						k := codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q"), int64(p*perProc+m))
						v := []byte(fmt.Sprintf("header-%08d|payload of a message", 0))
						mustSet(b, s, k, v)
						items[p] = append(items[p], k)
						vals[p] = append(vals[p], v)
					}
				}
				// deliver runs one delivery per deliverer at once, each
				// with cond (nil: none) on the control key.
				deliver := func(i int, cond func([]byte) engine.Cond, key []byte) time.Duration {
					var wg sync.WaitGroup
					errs := make([]error, procs)
					start := time.Now()
					for p := range procs {
						wg.Add(1)
						go func() {
							defer wg.Done()
							m := i % perProc
							next := []byte(fmt.Sprintf("header-%08d|payload of a message", i+1))
							errs[p] = apply(s, func(bt engine.Batch) {
								_ = bt.Require(engine.Equals(items[p][m], vals[p][m]))
								if cond != nil {
									_ = bt.Require(cond(key))
								}
								_ = bt.Set(items[p][m], next)
							})
							if errs[p] == nil {
								vals[p][m] = next
							}
						}()
					}
					wg.Wait()
					d := time.Since(start)
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
					return d
				}
				equals := func(k []byte) engine.Cond { return engine.Equals(k, ctl) }
				op := func(i int) time.Duration { return deliver(i, equals, present) }
				base := func(i int) time.Duration { return deliver(i, nil, nil) }
				if c.control == "absent" {
					op, base = func(i int) time.Duration { return deliver(i, engine.Absent, absent) }, op
				}
				pairedAs(b, c.vs, op, base)
			})
		}
	}
}
