package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
)

// ReceiveWait is Receive that blocks until it has something to return: it
// returns at least one leased message, or an error. It sleeps through a
// pause (see Pause) and while the queue is at its cap on messages in
// flight (SetMaxInFlight), without polling, until a Resume or room wakes
// it. It returns ctx.Err()
// when ctx ends first (without leasing anything once ctx has ended), and
// an error matching tipkv.ErrClosed when the DB closes. Bad arguments are
// tipkv.ErrInvalid at once, as in Receive.
//
// As in Receive, messages whose stored value does not decode move to the
// dead-letter queue and come back as an error matching tipkv.ErrCorrupt,
// together with the other messages (possibly none): a consumer loop logs
// it and goes on. Between deliveries it sleeps as Wait does.
func (q *Queue[T]) ReceiveWait(ctx context.Context, max int, lease time.Duration) ([]Message[T], error) {
	if max < 1 || lease <= 0 {
		return nil, fmt.Errorf("%w: queue %q: receive %d messages for %v: want max >= 1 and lease > 0", tipkv.ErrInvalid, q.c.name, max, lease)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ms, err := q.Receive(max, lease)
		if err != nil || len(ms) > 0 {
			return ms, err
		}
		if err := q.Wait(ctx); err != nil {
			return nil, err
		}
	}
}

// DefaultBackoff is Options.Backoff when it is nil: one second after the
// first delivery, doubling with each delivery after it (2s, 4s, 8s, ...),
// at most five minutes. attempts below 1 count as 1. It has no jitter:
// messages that failed together come back together, in queue order.
func DefaultBackoff(attempts int) time.Duration {
	const limit = 5 * time.Minute
	if attempts < 1 {
		attempts = 1
	}
	if attempts > 10 { // 1s << 9 is past the limit already
		return limit
	}
	return min(time.Second<<(attempts-1), limit)
}

// Retry gives up the lease that id names after a failed attempt: the
// message becomes visible again once the handle's Options.Backoff for its
// deliveries so far has passed, as Release with that delay does (a delay
// is written to the message, so it holds across a restart). A message
// that has been delivered MaxAttempts times becomes visible at once
// instead, so that the next Receive or Pop that reaches it moves it to
// the dead-letter queue without waiting.
//
// Errors are as for Release: ErrLeaseLost when id no longer names the
// message's lease, tipkv.ErrInvalid for the zero ID or a backoff that
// would end after 2262; then the lease goes on as before.
func (q *Queue[T]) Retry(id ID) error {
	c := q.c
	if c.sm != nil {
		attempts, err := c.heldAttempts(id)
		if err != nil {
			return fmt.Errorf("retry: %w", err)
		}
		return c.release(id, q.retryDelay(attempts), "retry")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("queue %q: retry: %w", c.name, tipkv.ErrClosed)
	}
	e, err := c.leased(id)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("retry: %w", err)
	}
	attempts := int(e.attempts)
	c.mu.Unlock()
	// If another call takes the lease meanwhile, release says so.
	return c.release(id, q.retryDelay(attempts), "retry")
}

// retryDelay is how long Retry hides a message delivered attempts times:
// the backoff, or nothing once the next delivery would dead-letter it.
func (q *Queue[T]) retryDelay(attempts int) time.Duration {
	if q.maxAttempts == 0 || attempts < q.maxAttempts {
		return q.backoff(attempts)
	}
	return 0
}
