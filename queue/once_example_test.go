package queue_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// A producer that retries enqueues once per key: the retry returns the
// first message's sequence number; the same key with another message is
// an error; once the message is acknowledged its UntilDone key has ended.
func ExampleQueue_EnqueueOnce() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	emails, err := queue.Open[Email](db, "emails", nil)
	if err != nil {
		log.Fatal(err)
	}
	welcome := Email{"ann@example.com", "welcome"}
	for range 2 { // a send, and its retry
		seq, dup, err := emails.EnqueueOnce(db, "signup-ann", tipkv.UntilDone(), welcome)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("seq %d, duplicate %v\n", seq, dup)
	}
	_, _, err = emails.EnqueueOnce(db, "signup-ann", tipkv.UntilDone(), Email{"ann@example.com", "other"})
	fmt.Println(errors.Is(err, tipkv.ErrIdempotencyMismatch))
	fmt.Println(emails.Len(), "message")

	msgs, err := emails.Receive(1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if err := emails.Ack(db, msgs[0].ID); err != nil {
		log.Fatal(err)
	}
	seq, dup, err := emails.EnqueueOnce(db, "signup-ann", tipkv.UntilDone(), welcome)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after the ack: seq %d, duplicate %v\n", seq, dup)
	// Output:
	// seq 1, duplicate false
	// seq 1, duplicate true
	// true
	// 1 message
	// after the ack: seq 2, duplicate false
}
