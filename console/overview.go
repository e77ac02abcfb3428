package console

import (
	"net/http"

	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// countCap bounds how many names the overview counts: one seek each, and
// a feed may hold millions of streams.
const countCap = 1000

func (c *Console) viewOverview(r *http.Request, p params) (any, error) {
	m, err := c.db.Metrics()
	if err != nil {
		return nil, err
	}
	o := Overview{Engine: m.Engine, Dir: c.db.Dir(), DiskUsage: m.Storage.DiskUsage, Uptime: m.Storage.Uptime, Metrics: m, Charts: c.samp != nil, Samples: []Sample{}}
	if c.samp != nil {
		o.Samples = c.samp.samples()
	}
	if o.Collections, o.CollectionsMore, err = countNames(versioned.Collections(c.db)); err != nil {
		return nil, err
	}
	if o.Streams, o.StreamsMore, err = countNames(versioned.Streams(c.db)); err != nil {
		return nil, err
	}
	if o.Queues, err = c.queueSummaries(); err != nil {
		return nil, err
	}
	return o, nil
}

// countNames counts up to countCap names, and says whether there are
// more.
func countNames(names func(func(string, error) bool)) (n int, more bool, err error) {
	for _, err := range names {
		if err != nil {
			return 0, false, err
		}
		if n == countCap {
			return n, true, nil
		}
		n++
	}
	return n, false, nil
}

func (c *Console) viewSamples(r *http.Request, p params) (any, error) {
	s := Samples{Samples: []Sample{}}
	if c.samp != nil {
		s.Interval, s.Samples = c.samp.interval, c.samp.samples()
	}
	return s, nil
}

// queueSummaries reads the figures of every queue of the store.
func (c *Console) queueSummaries() ([]QueueSummary, error) {
	out := []QueueSummary{}
	for name, err := range queue.Names(c.db) {
		if err != nil {
			return nil, err
		}
		if len(out) == countCap {
			break
		}
		out = append(out, c.queueSummary(name))
	}
	return out, nil
}
