package tipkvwatermill

import (
	"fmt"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// delivery is what a consumer group's subscription puts in the context of
// a message it hands out: where the message is leased, for AckIn.
type delivery struct {
	q        *queue.Queue[[]byte]
	id       queue.ID
	attempts int
	ackedIn  atomic.Bool // AckIn acknowledged it: the subscription does not
}

type deliveryKey struct{}

func deliveryOf(msg *message.Message) *delivery {
	if msg == nil {
		return nil
	}
	d, _ := msg.Context().Value(deliveryKey{}).(*delivery)
	return d
}

// AckIn acknowledges msg through w: with the *tipkv.Batch of the Update
// that writes what the handler made of the message, the acknowledgement
// commits with those writes or not at all, so a crash can neither lose
// the writes of an acknowledged message nor keep the writes of one that
// will be delivered again. That is exactly-once processing of the
// handler's own writes, on at-least-once delivery. The handler then
// returns nil (or calls msg.Ack()) as usual; the subscription does not
// acknowledge the message a second time. If the Update fails, return its
// error from the handler (msg.Nack()): the message is delivered again.
//
// msg must come from a consumer group's subscription of this package, in
// this process (AckIn finds the delivery in msg.Context(), which
// middleware that derives contexts keeps): otherwise ErrNotDelivered.
// Acknowledging a message whose lease was lost (it ran out and the group
// delivered it again) fails with an error matching queue.ErrLeaseLost,
// and so does the Update that returns it: the other delivery will write
// the result. On a shared engine the Update may run its function again
// (see tipkv.DB.Update); AckIn may be called again with it.
func AckIn(w tipkv.Writer, msg *message.Message) error {
	d := deliveryOf(msg)
	if d == nil {
		return ErrNotDelivered
	}
	if err := d.q.Ack(w, d.id); err != nil {
		return fmt.Errorf("tipkvwatermill: ack message %s: %w", msg.UUID, err)
	}
	d.ackedIn.Store(true)
	return nil
}

// Attempts returns how many times msg has been delivered to its consumer
// group, this delivery included (counted durably, see
// SubscriberConfig.MaxAttempts), or 0 for a message that a consumer
// group's subscription of this package did not deliver.
func Attempts(msg *message.Message) int {
	if d := deliveryOf(msg); d != nil {
		return d.attempts
	}
	return 0
}
