package pebblestore

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Event kinds, in Event.Kind.
const (
	EventFlush         = "flush"            // a memtable was written to an sstable (Error: it failed)
	EventCompaction    = "compaction"       // a compaction ended (Error: it failed)
	EventWriteStall    = "write-stall"      // Pebble stopped writes until memtables or L0 drain
	EventWriteStallEnd = "write-stall-end"  // writes go on
	EventDiskSlow      = "disk-slow"        // a write or sync took longer than Pebble's threshold
	EventLowDiskSpace  = "low-disk-space"   // the disk is nearly full
	EventBackgroundErr = "background-error" // a flush or compaction failed; Pebble retries it
	EventWritesRefused = "writes-refused"   // writes stopped while the disk fails: the store refuses new ones
	EventWritesResumed = "writes-resumed"   // a flush succeeded: writes are accepted again
	EventCorruption    = "corruption"       // a file is corrupt (Error names it)
	EventFatal         = "fatal"            // Pebble cannot go on: the store failed
	EventError         = "error"            // an error Pebble logged (an obsolete file it could not delete, say)
)

// EventCompactionsStopped: a compaction met a corrupt table, and the store
// runs none until it is reopened (Error names the table; see compactions).
const EventCompactionsStopped = "compactions-stopped"

// Level is the level the event is logged at: Debug for routine work
// (flushes and compactions), Info when writes resume, Warn for what slows
// writes down or warns of trouble (stalls, a slow or nearly full disk, a
// flush or compaction that failed and will be retried), Error for what
// loses or refuses data (background errors, refused writes, corruption,
// compactions stopped by it, a fatal error).
func (e Event) Level() slog.Level {
	switch e.Kind {
	case EventFlush, EventCompaction:
		if e.Error != nil {
			return slog.LevelWarn
		}
		return slog.LevelDebug
	case EventWriteStallEnd, EventWritesResumed:
		return slog.LevelInfo
	case EventWriteStall, EventDiskSlow, EventLowDiskSpace:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// messages are the log messages of the event kinds.
var messages = map[string]string{
	EventFlush:         "tipkv: flush",
	EventCompaction:    "tipkv: compaction",
	EventWriteStall:    "tipkv: write stall: writes wait for flushes or compactions",
	EventWriteStallEnd: "tipkv: write stall ended",
	EventDiskSlow:      "tipkv: disk slow",
	EventLowDiskSpace:  "tipkv: disk nearly full",
	EventBackgroundErr: "tipkv: background error",
	EventWritesRefused: "tipkv: writes refused: the disk fails and Pebble has stopped writes",
	EventWritesResumed: "tipkv: writes resumed",
	EventCorruption:    "tipkv: corruption",
	EventFatal:         "tipkv: the store failed",
	EventError:         "tipkv: pebble error",

	EventCompactionsStopped: "tipkv: compactions stopped: a compaction met a corrupt table",
}

// log writes e to l: its message, then the attributes event (the kind),
// info (Pebble's description) and error.
func (e Event) log(l *slog.Logger) {
	lvl := e.Level()
	ctx := context.Background()
	if !l.Enabled(ctx, lvl) {
		return
	}
	msg, ok := messages[e.Kind]
	if !ok {
		msg = "tipkv: " + e.Kind
	}
	attrs := []slog.Attr{slog.String("event", e.Kind)}
	if e.Info != "" {
		attrs = append(attrs, slog.String("info", e.Info))
	}
	if e.Error != nil {
		attrs = append(attrs, slog.Any("error", e.Error))
	}
	l.LogAttrs(ctx, lvl, msg, attrs...)
}

// counters count events since the store opened, for EngineMetrics.
type counters struct {
	writeStalls   atomic.Int64
	stallNanos    atomic.Int64
	stallStart    atomic.Int64 // Unix nanoseconds of the stall in progress, 0 if none
	diskSlow      atomic.Int64
	backgroundErr atomic.Int64
	logged        atomic.Int64
}

func (c *counters) count(e Event) {
	switch e.Kind {
	case EventWriteStall:
		c.writeStalls.Add(1)
		c.stallStart.Store(time.Now().UnixNano())
	case EventWriteStallEnd:
		if start := c.stallStart.Swap(0); start != 0 {
			c.stallNanos.Add(time.Now().UnixNano() - start)
		}
	case EventDiskSlow:
		c.diskSlow.Add(1)
	case EventBackgroundErr:
		c.backgroundErr.Add(1)
	case EventError:
		c.logged.Add(1)
	}
}

// stallTime is the time writes were stalled, the stall in progress
// included.
func (c *counters) stallTime() time.Duration {
	d := c.stallNanos.Load()
	if start := c.stallStart.Load(); start != 0 {
		d += max(0, time.Now().UnixNano()-start)
	}
	return time.Duration(d)
}
