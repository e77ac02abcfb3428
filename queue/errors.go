package queue

import "github.com/tipkv/tipkv"

// ErrLeaseLost is returned by Ack, Release, Retry and Extend when an ID no
// longer names the message's current delivery: the message was
// acknowledged or released already, it was delivered again after its
// lease ended (on a shared engine, by any process, ClockSkew after the
// end), the ID comes from another process, or the DB was reopened since.
// Nothing is changed. The message may be (or have been) delivered to
// another consumer. It is tipkv.ErrLeaseLost, and matches
// tipkv.ErrConflict.
var ErrLeaseLost = tipkv.ErrLeaseLost
