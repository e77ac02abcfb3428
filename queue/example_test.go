package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

type Email struct {
	To      string
	Subject string
}

// Work queue: receive with a lease, handle, acknowledge.
func Example() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	emails, err := queue.Open[Email](db, "emails", nil)
	if err != nil {
		log.Fatal(err)
	}

	first, err := emails.Enqueue(db, Email{"ann@example.com", "hello"}, Email{"bob@example.com", "hi"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("enqueued #%d and #%d\n", first, first+1)
	msgs, err := emails.Receive(10, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("#%d to %s: %s (attempt %d)\n", m.Seq, m.Value.To, m.Value.Subject, m.Attempts)
		if err := emails.Ack(db, m.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("left:", emails.Len())
	// Output:
	// enqueued #1 and #2
	// #1 to ann@example.com: hello (attempt 1)
	// #2 to bob@example.com: hi (attempt 1)
	// left: 0
}

// The transactional outbox: the message commits in the same batch as the
// state change it announces, so both survive a crash or neither does.
func Example_outbox() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	outbox, err := queue.Open[string](db, "outbox", nil)
	if err != nil {
		log.Fatal(err)
	}

	var seq int64
	err = db.Update(func(b *tipkv.Batch) error {
		// ... write the order document through b here ...
		var err error
		seq, err = outbox.Enqueue(b, "order-17 placed") // its number if the Update commits
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("committed #%d\n", seq)

	// The relay: wait for messages, publish, acknowledge.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := outbox.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	msgs, err := outbox.Receive(1000, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("publish #%d: %s\n", m.Seq, m.Value)
	}
	if err := outbox.Ack(db, msgs[0].ID); err != nil {
		log.Fatal(err)
	}
	// Output:
	// committed #1
	// publish #1: order-17 placed
}

// Messages that keep failing move to the dead-letter queue, where they can
// be listed and requeued.
func ExampleQueue_DeadLetters() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs, err := queue.Open(db, "jobs", &queue.Options[string]{MaxAttempts: 2})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := jobs.Enqueue(db, "resize photo 9"); err != nil {
		log.Fatal(err)
	}
	for {
		msgs, err := jobs.Receive(1, time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		if len(msgs) == 0 {
			break // the third delivery moved it to the dead letters
		}
		fmt.Println("failed attempt", msgs[0].Attempts)
		if err := jobs.Release(msgs[0].ID, 0); err != nil { // give up; visible again at once
			log.Fatal(err)
		}
	}
	for d, err := range jobs.DeadLetters() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("dead: #%d %q after %d attempts\n", d.Seq, d.Value, d.Attempts)
		if err := jobs.Requeue(db, d.Seq); err != nil {
			log.Fatal(err)
		}
	}
	msgs, err := jobs.Pop(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("requeued as #%d, attempt %d\n", msgs[0].Seq, msgs[0].Attempts)
	// Output:
	// failed attempt 1
	// failed attempt 2
	// dead: #1 "resize photo 9" after 2 attempts
	// requeued as #2, attempt 1
}

// A long-running consumer: ReceiveWait sleeps until there is work, a
// failed message is retried after a backoff, and ending the context stops
// the loop. Here the loop stops once its three jobs are done; a service
// would end the context when it shuts down.
func ExampleQueue_ReceiveWait() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs, err := queue.Open(db, "jobs", &queue.Options[string]{
		MaxAttempts: 5,
		// Quick, for the example; the default waits 1s, 2s, 4s, ... up to 5m.
		Backoff: func(attempts int) time.Duration { return time.Duration(attempts) * 10 * time.Millisecond },
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := jobs.Enqueue(db, "resize photo 1", "upload to a flaky server", "send mail"); err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := 0
	handle := func(m queue.Message[string]) error {
		if m.Value == "upload to a flaky server" && m.Attempts == 1 {
			return errors.New("connection reset")
		}
		if done++; done == 3 {
			stop()
		}
		return nil
	}
	for {
		msgs, err := jobs.ReceiveWait(ctx, 100, time.Minute)
		if err != nil && ctx.Err() != nil {
			fmt.Println("stopped")
			return
		}
		if err != nil && !errors.Is(err, tipkv.ErrCorrupt) {
			log.Fatal(err)
		}
		// With ErrCorrupt, the bad message is in the dead letters already:
		// a service would log err and go on with the other msgs.
		for _, m := range msgs {
			if err := handle(m); err != nil {
				fmt.Printf("%s: attempt %d failed: %v\n", m.Value, m.Attempts, err)
				if err := jobs.Retry(m.ID); err != nil {
					log.Fatal(err)
				}
				continue
			}
			fmt.Printf("%s: done (attempt %d)\n", m.Value, m.Attempts)
			if err := jobs.Ack(db, m.ID); err != nil {
				log.Fatal(err)
			}
		}
	}
	// Output:
	// resize photo 1: done (attempt 1)
	// upload to a flaky server: attempt 1 failed: connection reset
	// send mail: done (attempt 1)
	// upload to a flaky server: done (attempt 2)
	// stopped
}

// Pausing a queue: an import enqueues its batch and pauses the queue in
// one Update, so no consumer starts on half a batch; a consumer asleep in
// ReceiveWait wakes at the Resume. A cap bounds the messages leased at
// once, whoever receives them.
func ExampleQueue_Pause() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs, err := queue.Open[string](db, "jobs", nil)
	if err != nil {
		log.Fatal(err)
	}
	err = db.Update(func(b *tipkv.Batch) error {
		if _, err := jobs.Enqueue(b, "row 1", "row 2", "row 3"); err != nil {
			return err
		}
		return jobs.Pause(b)
	})
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := jobs.Receive(10, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("received while paused:", len(msgs))

	if err := jobs.SetMaxInFlight(db, 2); err != nil {
		log.Fatal(err)
	}
	got := make(chan []queue.Message[string])
	go func() {
		msgs, err := jobs.ReceiveWait(context.Background(), 10, time.Minute) // sleeps until the Resume
		if err != nil {
			log.Fatal(err)
		}
		got <- msgs
	}()
	if err := jobs.Resume(db); err != nil {
		log.Fatal(err)
	}
	msgs = <-got
	fmt.Println("received after the resume:", len(msgs), "(the cap)")
	st := jobs.Stats()
	fmt.Println("leased:", st.Leased, "max in flight:", st.MaxInFlight, "paused:", st.Paused)
	// Output:
	// received while paused: 0
	// received after the resume: 2 (the cap)
	// leased: 2 max in flight: 2 paused: false
}
