package tipkvwatermill_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
	tipkvwatermill "github.com/tipkv/tipkv/watermill"
)

// Publish, subscribe in a consumer group, acknowledge.
func Example() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true}) // or a directory, etcdkv.Open, sqlkv.Open
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	pub, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
	if err != nil {
		log.Fatal(err)
	}
	sub, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "mailer"})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	m := message.NewMessage(watermill.NewUUID(), []byte("welcome ann@example.com"))
	m.Metadata.Set("tenant", "acme")
	if err := pub.Publish("signups", m); err != nil {
		log.Fatal(err)
	}
	msgs, err := sub.Subscribe(context.Background(), "signups")
	if err != nil {
		log.Fatal(err)
	}
	got := <-msgs
	fmt.Printf("%s (tenant %s, attempt %d)\n", got.Payload, got.Metadata.Get("tenant"), tipkvwatermill.Attempts(got))
	got.Ack()
	// Output:
	// welcome ann@example.com (tenant acme, attempt 1)
}

// A Router consumes a tipkv topic through middleware: a correlation ID
// for every message, Retry for a handler that fails once, and Recoverer
// for one that panics.
func Example_router() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	pub, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
	if err != nil {
		log.Fatal(err)
	}
	sub, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "mailer"})
	if err != nil {
		log.Fatal(err)
	}

	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		log.Fatal(err)
	}
	router.AddMiddleware(
		middleware.CorrelationID,
		middleware.Retry{MaxRetries: 3, InitialInterval: time.Millisecond}.Middleware,
		middleware.Recoverer,
	)
	done := make(chan struct{})
	calls := map[string]int{}
	router.AddConsumerHandler("send-email", "emails", sub, func(m *message.Message) error {
		to := string(m.Payload)
		calls[to]++
		if to == "bob@example.com" && calls[to] == 1 {
			fmt.Println("send to", to, "failed, retrying")
			return errors.New("smtp: connection reset")
		}
		fmt.Println("sent to", to, "correlation", middleware.MessageCorrelationID(m))
		if len(calls) == 2 {
			close(done)
		}
		return nil
	})

	for i, to := range []string{"ann@example.com", "bob@example.com"} {
		m := message.NewMessage(watermill.NewUUID(), []byte(to))
		middleware.SetCorrelationID(fmt.Sprint("req-", i+1), m)
		if err := pub.Publish("emails", m); err != nil {
			log.Fatal(err)
		}
	}
	go func() {
		if err := router.Run(context.Background()); err != nil {
			log.Fatal(err)
		}
	}()
	<-done
	if err := router.Close(); err != nil { // closes sub
		log.Fatal(err)
	}
	// Output:
	// sent to ann@example.com correlation req-1
	// send to bob@example.com failed, retrying
	// sent to bob@example.com correlation req-2
}

type Order struct {
	Item   string
	Status string
}

// A handler that writes a document and publishes a message in one
// Update, acknowledging its own message in that Update too: the order's
// new version, the "order-paid" event and the end of the "payments"
// message commit together or not at all, so a crash at any point neither
// loses the event nor pays an order twice.
func Example_outbox() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	pub, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
	if err != nil {
		log.Fatal(err)
	}
	payments, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	shipping, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "shipping"})
	if err != nil {
		log.Fatal(err)
	}
	defer shipping.Close()
	if _, err := orders.Put(db, "o-17", Order{Item: "teapot", Status: "placed"}); err != nil {
		log.Fatal(err)
	}

	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		log.Fatal(err)
	}
	router.AddConsumerHandler("mark-paid", "payments", payments, func(m *message.Message) error {
		id := string(m.Payload)
		return db.Update(func(b *tipkv.Batch) error {
			o, err := orders.Latest(id)
			if err != nil {
				return err
			}
			o.Value.Status = "paid"
			if _, err := orders.Put(b, id, o.Value); err != nil {
				return err
			}
			paid := message.NewMessage(watermill.NewUUID(), []byte(id))
			if err := pub.PublishIn(b, "order-paid", paid); err != nil {
				return err
			}
			return tipkvwatermill.AckIn(b, m)
		})
	})
	go func() {
		if err := router.Run(context.Background()); err != nil {
			log.Fatal(err)
		}
	}()
	if err := pub.Publish("payments", message.NewMessage(watermill.NewUUID(), []byte("o-17"))); err != nil {
		log.Fatal(err)
	}

	toShip, err := shipping.Subscribe(context.Background(), "order-paid")
	if err != nil {
		log.Fatal(err)
	}
	m := <-toShip
	o, err := orders.Latest(string(m.Payload))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ship %s: %s, version %d, %s\n", m.Payload, o.Value.Item, o.Version, o.Value.Status)
	m.Ack()
	if err := router.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// ship o-17: teapot, version 2, paid
}
