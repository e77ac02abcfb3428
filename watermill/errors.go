package tipkvwatermill

import "errors"

// ErrPublisherClosed is returned by Publish and PublishIn after the
// Publisher's Close.
var ErrPublisherClosed = errors.New("tipkvwatermill: publisher is closed")

// ErrSubscriberClosed is returned by Subscribe and SubscribeInitialize
// after the Subscriber's Close.
var ErrSubscriberClosed = errors.New("tipkvwatermill: subscriber is closed")

// ErrNotDelivered is returned by AckIn for a message that this package's
// Subscriber did not deliver (a copy, or a message built by hand), and for
// a message of a Subscriber in Replay mode, which has nothing stored to
// acknowledge.
var ErrNotDelivered = errors.New("tipkvwatermill: the message was not delivered by a consumer group of this package")
