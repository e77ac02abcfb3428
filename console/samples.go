package console

import (
	"sync"
	"time"

	"github.com/tipkv/tipkv"
)

// Sample is one reading of DB.Metrics kept for the overview's charts:
// gauges as read, counters as rates per second since the sample before.
type Sample struct {
	Time      time.Time `json:"time"`
	DiskUsage uint64    `json:"disk_usage"` // bytes
	// Writes is versions written (collections) plus events appended
	// (feeds) plus messages enqueued, per second, by this process.
	Writes float64 `json:"writes_per_second"`
	// Deliveries and Acks are the queues' deliveries and acks per second.
	Deliveries float64 `json:"deliveries_per_second"`
	Acks       float64 `json:"acks_per_second"`
	// Depth and DeadLetters add up the queues this process has open.
	Depth       int64 `json:"depth"`
	DeadLetters int64 `json:"dead_letters"`
	// CacheHitRate is the block cache's, from 0 to 1, over the interval.
	CacheHitRate   float64 `json:"cache_hit_rate"`
	ReadAmp        int     `json:"read_amp"`
	CompactionDebt uint64  `json:"compaction_debt"`
	MemTableBytes  uint64  `json:"memtable_bytes"`
}

// counters are the cumulative figures a Sample turns into rates.
type counters struct {
	writes, deliveries, acks uint64
	hits, misses             int64
}

func countersOf(m tipkv.Metrics) counters {
	c := counters{writes: m.Feeds.Appends, hits: m.Storage.CacheHits, misses: m.Storage.CacheMisses}
	for _, x := range m.Collections {
		c.writes += x.Writes
	}
	for _, q := range m.Queues {
		c.writes += q.Enqueued
		c.deliveries += q.Deliveries
		c.acks += q.Acks
	}
	return c
}

// sampler keeps the last n samples of a DB's metrics in a ring, taken
// every interval by a goroutine of its own until stop.
type sampler struct {
	db       *tipkv.DB
	interval time.Duration

	mu   sync.Mutex
	ring []Sample // oldest first once full: ring[next:], then ring[:next]
	next int
	full bool
	last counters
	at   time.Time // when last was read; zero before the first reading
}

func newSampler(db *tipkv.DB, interval time.Duration, n int) *sampler {
	return &sampler{db: db, interval: interval, ring: make([]Sample, n)}
}

// run samples until done is closed or the DB closes.
func (s *sampler) run(done <-chan struct{}) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	s.take(time.Now())
	for {
		select {
		case <-done:
			return
		case <-s.db.Done():
			return
		case now := <-t.C:
			s.take(now)
		}
	}
}

// take reads the metrics once. The first reading only sets the counters'
// base: rates need two.
func (s *sampler) take(now time.Time) {
	m, err := s.db.Metrics()
	if err != nil {
		return
	}
	c := countersOf(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		s.last, s.at = c, now
		return
	}
	secs := now.Sub(s.at).Seconds()
	if secs <= 0 {
		return
	}
	rate := func(a, b uint64) float64 {
		if a < b {
			return 0
		}
		return float64(a-b) / secs
	}
	x := Sample{
		Time:           now.UTC(),
		DiskUsage:      m.Storage.DiskUsage,
		Writes:         rate(c.writes, s.last.writes),
		Deliveries:     rate(c.deliveries, s.last.deliveries),
		Acks:           rate(c.acks, s.last.acks),
		ReadAmp:        m.Storage.ReadAmp,
		CompactionDebt: m.Storage.CompactionDebt,
		MemTableBytes:  m.Storage.MemTableBytes,
	}
	if h, mi := c.hits-s.last.hits, c.misses-s.last.misses; h+mi > 0 {
		x.CacheHitRate = float64(h) / float64(h+mi)
	}
	for _, q := range m.Queues {
		x.Depth += q.Depth
		x.DeadLetters += q.DeadLetters
	}
	s.last, s.at = c, now
	s.ring[s.next] = x
	s.next = (s.next + 1) % len(s.ring)
	s.full = s.full || s.next == 0
}

// samples returns the samples kept, oldest first.
func (s *sampler) samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return append([]Sample(nil), s.ring[:s.next]...)
	}
	return append(append([]Sample(nil), s.ring[s.next:]...), s.ring[:s.next]...)
}
