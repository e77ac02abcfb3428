package tipkvwatermill

import (
	"fmt"
	"strconv"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// DefaultPrefix is PublisherConfig.Prefix and SubscriberConfig.Prefix when
// they are empty.
const DefaultPrefix = "watermill/"

// Where a topic and its consumer groups live in the DB (see "Keys" in the
// package doc):
//
//	topic  feed stream  prefix + topic
//	group  cursor       "g/" + group, on the topic's stream
//	       queue        prefix + len(topic) + ":" + topic + "/" + group
//
// The length in the queue name makes it unambiguous whatever bytes a
// topic or group holds ("a/b" + "c" and "a" + "b/c" differ).

// streamName returns the feed stream of topic.
func streamName(prefix, topic string) (string, error) {
	if topic == "" {
		return "", fmt.Errorf("%w: tipkvwatermill: empty topic", tipkv.ErrInvalid)
	}
	s := prefix + topic
	if len(s) > versioned.MaxNameSize {
		return "", fmt.Errorf("%w: tipkvwatermill: topic %.32q...: prefix and topic are %d bytes, over the %d-byte limit of a stream name", tipkv.ErrInvalid, topic, len(s), versioned.MaxNameSize)
	}
	return s, nil
}

// cursorName returns the name of group's cursor on its topic's stream.
func cursorName(group string) string { return "g/" + group }

// queueName returns the name of the queue of group on topic.
func queueName(prefix, topic, group string) (string, error) {
	q := prefix + strconv.Itoa(len(topic)) + ":" + topic + "/" + group
	if len(q) > queue.MaxNameSize {
		return "", fmt.Errorf("%w: tipkvwatermill: topic %.32q, group %.32q: the group's queue name is %d bytes, over the %d-byte limit", tipkv.ErrInvalid, topic, group, len(q), queue.MaxNameSize)
	}
	return q, nil
}
