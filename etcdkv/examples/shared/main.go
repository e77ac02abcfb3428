// Command shared runs tipkv on an etcd cluster with two handles sharing
// one store, as two replicas of a service would: it starts a 3-member
// etcd cluster inside the process (data in a temporary directory, removed
// at the end), then one handle places orders (a document version and an
// outbox message in one Update) while the other receives the messages,
// reads the version each names, and acknowledges them.
//
//	cd etcdkv && go run ./examples/shared
//
// With -endpoints it uses a running cluster instead (a namespace of its
// own, left behind):
//
//	go run ./examples/shared -endpoints http://127.0.0.1:2379
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Order is the document; Placed the message that announces a version of it.
type (
	Order struct {
		Item  string `msgpack:"item"`
		Count int    `msgpack:"count"`
	}
	Placed struct {
		Order   string `msgpack:"order"`
		Version int64  `msgpack:"version"`
	}
)

func main() {
	endpoints := flag.String("endpoints", "", "client URLs of a running etcd cluster, comma-separated (default: start one in process)")
	orders := flag.Int("orders", 20, "orders to place")
	flag.Parse()
	if err := run(*endpoints, *orders, func(s string) { fmt.Println(s) }); err != nil {
		log.Fatal(err)
	}
}

// run places n orders through one handle and consumes them through the
// other, printing what happens with say. It checks that every order's
// message arrives once and names the version written.
func run(endpoints string, n int, say func(string)) error {
	eps := strings.Split(endpoints, ",")
	if endpoints == "" {
		start := time.Now()
		cluster, err := etcdtest.Start(etcdtest.Options{Members: 3})
		if err != nil {
			return err
		}
		defer cluster.Close()
		eps = cluster.Endpoints()
		say(fmt.Sprintf("started a 3-member etcd cluster in %v: %s", time.Since(start).Round(time.Millisecond), strings.Join(eps, " ")))
	}
	ctx := context.Background()
	cfg := etcdkv.Config{Endpoints: eps, Namespace: fmt.Sprintf("/examples/shared/%d/", time.Now().UnixNano())}

	// Two handles on one namespace, each with its own etcd client and its
	// own memory: two processes would open the store the same way.
	shop, err := etcdkv.Open(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer shop.Close()
	shipping, err := etcdkv.Open(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer shipping.Close()

	// The shop side: each order is a document version and its message,
	// committed together or not at all.
	shopOrders, err := versioned.NewCollection[Order](shop, "orders", nil)
	if err != nil {
		return err
	}
	shopOutbox, err := queue.Open[Placed](shop, "placed", nil)
	if err != nil {
		return err
	}
	placed := make(chan error, 1)
	go func() {
		for i := range n {
			id := fmt.Sprintf("order-%d", i%5) // 5 orders, each changed n/5 times
			err := shop.Update(func(b *tipkv.Batch) error {
				v, err := shopOrders.Put(b, id, Order{Item: "tea", Count: i + 1})
				if err != nil {
					return err
				}
				_, err = shopOutbox.Enqueue(b, Placed{Order: id, Version: v})
				return err
			})
			if err != nil {
				placed <- err
				return
			}
		}
		placed <- nil
	}()

	// The shipping side: receive with a lease, read the version the
	// message names, acknowledge.
	shipOrders, err := versioned.NewCollection[Order](shipping, "orders", nil)
	if err != nil {
		return err
	}
	inbox, err := queue.Open[Placed](shipping, "placed", nil)
	if err != nil {
		return err
	}
	seen := map[Placed]bool{}
	start := time.Now()
	for len(seen) < n {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ms, err := inbox.ReceiveWait(wctx, 10, time.Minute)
		cancel()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		ids := make([]queue.ID, len(ms))
		for i, m := range ms {
			if seen[m.Value] {
				return fmt.Errorf("%v delivered twice", m.Value)
			}
			seen[m.Value] = true
			doc, err := shipOrders.Get(m.Value.Order, m.Value.Version)
			if err != nil {
				return fmt.Errorf("%s version %d: %w", m.Value.Order, m.Value.Version, err)
			}
			say(fmt.Sprintf("shipping %s version %d: %d × %s (message %d, attempt %d)", m.Value.Order, doc.Version, doc.Value.Count, doc.Value.Item, m.Seq, m.Attempts))
			ids[i] = m.ID
		}
		if err := inbox.Ack(shipping, ids...); err != nil {
			return err
		}
	}
	if err := <-placed; err != nil {
		return err
	}
	if st, err := inbox.ReadStats(); err != nil || st.Len != 0 {
		return fmt.Errorf("queue after the run: %+v, %v", st, err)
	}
	for i := range min(n, 5) {
		id := fmt.Sprintf("order-%d", i)
		d, err := shipOrders.Latest(id)
		if err != nil {
			return err
		}
		versions, err := shipOrders.Count(id)
		if err != nil {
			return err
		}
		say(fmt.Sprintf("%s: %d versions, the latest %d × %s", id, versions, d.Value.Count, d.Value.Item))
	}
	say(fmt.Sprintf("%d orders placed by one handle and shipped by the other in %v", n, time.Since(start).Round(time.Millisecond)))
	return nil
}
