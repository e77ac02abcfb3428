package tipkvwatermill

import (
	"context"
	"errors"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/tipkv/tipkv"
)

// replaySub is a subscription in Replay mode: it follows the topic's
// stream from its oldest message, holding its position in memory only.
type replaySub struct {
	*subscription
}

func (rs *replaySub) run() {
	defer rs.end()
	var after int64
	for !rs.stopped() {
		for ev, err := range rs.s.feed.Follow(rs.ctx, rs.stream, after) {
			if err != nil {
				if !errors.Is(err, tipkv.ErrClosed) && !rs.stopped() {
					rs.s.logger.Error("Cannot read the topic, retrying", err, rs.fields)
					rs.pause(rs.s.cfg.RetryInterval, nil, 0)
				}
				break
			}
			after = ev.Position
			r, err := decodeRecord(ev.Value)
			if err != nil {
				rs.s.logger.Error("Message in the topic does not decode, passed over", err, rs.fields)
				continue
			}
			if !rs.deliver(r) {
				return
			}
		}
	}
}

// deliver hands r out until it is acknowledged, again after each Nack.
func (rs *replaySub) deliver(r record) bool {
	for {
		wm := message.NewMessage(r.uuid, append([]byte(nil), r.payload...))
		for k, v := range r.metadata {
			wm.Metadata[k] = v
		}
		ctx, cancel := context.WithCancel(rs.ctx)
		wm.SetContext(ctx)
		acked, ok := rs.handOut(wm, nil, 0)
		cancel()
		if !ok {
			return false
		}
		if acked {
			return true
		}
		if !rs.pause(rs.s.cfg.NackDelay, nil, 0) {
			return false
		}
	}
}
