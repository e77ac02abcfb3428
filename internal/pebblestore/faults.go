package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/codec"
)

// faults is how the store survives what Pebble treats as fatal, so that a
// failing disk or a corrupt file never takes the host process down.
//
//   - Corruption. Pebble reports a corrupt table through its DataCorruption
//     event (whose default handler exits the process) and returns an error
//     to the read that met it. The store records the file and makes the
//     error match codec.ErrCorrupt, naming the file; the rest of the store
//     stays usable.
//   - A compaction that meets corruption. Pebble would pick it again at
//     once and for ever (see compactions), so the store stops compactions
//     until it is reopened: EventCompactionsStopped, logged once at Error
//     with the file; a Compact in progress or later returns the error. Reads
//     and writes go on, but L0 deepens with every flush, and Pebble stops
//     writes for good once it is full: the store refuses writes and
//     flushes, with that error, before it is (see l0Watch).
//   - Fatal errors. Pebble calls its logger's Fatalf where it cannot go on
//     (a commit whose WAL write failed, a manifest it cannot write); the
//     default exits the process. The store records the error and fails:
//     every later call returns it, Close leaves Pebble open (it cannot close
//     cleanly then), and the caller reopens the store, in a new process, once
//     the cause is fixed. If Fatalf runs inside one of the store's own calls
//     it unwinds, by a panic the call recovers, to an error of that call; on
//     one of Pebble's background goroutines it parks that goroutine for
//     good, so Pebble never continues in the state it called fatal.
//   - A disk that fills while Pebble flushes. Flushes fail in the
//     background (Pebble retries them at once), memtables pile up and Pebble
//     stops writes; a write then blocks inside Pebble until the disk has
//     room. Once writes are stopped while a background error stands, the
//     store refuses every new write at once with that error (it matches
//     syscall.ENOSPC on a full disk) and Close does not wait for the writes
//     already blocked: they complete, acknowledged, if space returns. No
//     call can unblock a write that is already inside Pebble's commit.
type faults struct {
	s      *Store
	events func(Event)
	logger *slog.Logger // nil: silent
	counters

	failed atomic.Bool
	halted atomic.Bool // writes stopped while a background error stands
	l0     l0Watch     // how deep L0 is once compactions stop

	mu       sync.Mutex
	fatal    error
	bgErr    error           // the last background error; cleared by a successful flush
	stopped  bool            // Pebble has stopped writes (a write stall)
	corrupts []error         // one per file found corrupt
	paths    map[string]bool // the files found corrupt
	found    []string        // the same, in the order found
}

func (f *faults) init(s *Store, events func(Event), logger *slog.Logger) {
	f.s, f.events, f.logger = s, events, logger
}

// emit counts e, logs it and hands it to the Events hook.
func (f *faults) emit(e Event) {
	f.count(e)
	if f.logger != nil {
		e.log(f.logger)
	}
	if f.events != nil {
		f.events(e)
	}
}

// failure returns the error the store failed with, or nil.
func (f *faults) failure() error {
	if !f.failed.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

func (f *faults) fail(err error) {
	f.mu.Lock()
	if f.fatal == nil {
		f.fatal = fmt.Errorf("tipkv: the store failed and refuses every call until it is reopened: %w", err)
		f.failed.Store(true)
	}
	f.mu.Unlock()
	f.emit(Event{Kind: EventFatal, Error: err, Info: err.Error()})
	f.s.gate.signal() // a Close waiting on calls that will never finish
}

// stalled reports whether Pebble has stopped writes on a disk that fails.
func (f *faults) stalled() bool { return f.halted.Load() || f.failed.Load() }

// background returns the standing background error.
func (f *faults) background() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bgErr
}

// updateHalted recomputes whether writes are refused; f.mu is held. It
// returns the event to emit (after unlocking) when that changed.
func (f *faults) updateHalted() *Event {
	stuck := f.s.compactions.stoppedBy()
	h := f.stopped && (f.bgErr != nil || stuck != nil)
	if f.halted.Swap(h) == h {
		return nil
	}
	if h && f.bgErr == nil {
		f.s.gate.signal()
		return &Event{Kind: EventWritesRefused, Error: stuck, Info: "Pebble stopped writes until compactions drain L0, and compactions are stopped: new writes are refused until the store is reopened"}
	}
	if h {
		f.s.gate.signal()
		return &Event{Kind: EventWritesRefused, Error: f.bgErr, Info: "Pebble stopped writes while the disk fails: new writes are refused until a flush succeeds"}
	}
	return &Event{Kind: EventWritesResumed}
}

func (f *faults) emitIf(e *Event) {
	if e != nil {
		f.emit(*e)
	}
}

// writable returns an error when writes must be refused: the store failed,
// or Pebble stopped writes on a failing disk.
func (f *faults) writable() error {
	if err := f.failure(); err != nil {
		return err
	}
	if f.l0.full.Load() {
		return f.l0Error()
	}
	if f.halted.Load() {
		if stuck := f.s.compactions.stoppedBy(); stuck != nil && f.background() == nil {
			return fmt.Errorf("tipkv: writes refused: Pebble has stopped writes until compactions drain L0, and compactions are stopped: %w", stuck)
		}
		return fmt.Errorf("tipkv: writes refused: the disk fails in the background and Pebble has stopped writes (free space, then retry): %w", f.background())
	}
	return nil
}

// wrap makes a corruption error match codec.ErrCorrupt and name the files
// Pebble reported.
func (f *faults) wrap(err error) error {
	if err == nil || !pebble.IsCorruptionError(err) || errors.Is(err, codec.ErrCorrupt) {
		return err
	}
	files := f.files()
	if len(files) == 0 {
		return fmt.Errorf("%w: %w", codec.ErrCorrupt, err)
	}
	return fmt.Errorf("%w: %w (corrupt file: %s)", codec.ErrCorrupt, err, strings.Join(files, ", "))
}

// files returns the files found corrupt, in the order they were found.
func (f *faults) files() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.found...)
}

func (f *faults) corruptions() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.corrupts...)
}

// listener returns the Pebble event listener of the store.
func (f *faults) listener() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			err := fmt.Errorf("%w: file %s: %v", codec.ErrCorrupt, info.Path, info.Details)
			f.mu.Lock()
			if f.paths == nil {
				f.paths = map[string]bool{}
			}
			if !f.paths[info.Path] {
				f.paths[info.Path] = true
				f.found = append(f.found, info.Path)
				f.corrupts = append(f.corrupts, err)
			}
			f.mu.Unlock()
			f.emit(Event{Kind: EventCorruption, Error: err, Info: info.String()})
		},
		BackgroundError: func(err error) {
			f.mu.Lock()
			f.bgErr = err
			e := f.updateHalted()
			f.mu.Unlock()
			f.emit(Event{Kind: EventBackgroundErr, Error: err, Info: err.Error()})
			f.emitIf(e)
		},
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				f.l0.flushes.Add(1)
				if f.s.compactions.stoppedBy() != nil {
					f.checkL0()
				}
			}
			var e *Event
			if info.Err == nil {
				f.mu.Lock()
				f.bgErr = nil
				e = f.updateHalted()
				f.mu.Unlock()
			}
			f.emit(Event{Kind: EventFlush, Error: info.Err, Info: info.String()})
			f.emitIf(e)
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			f.emit(Event{Kind: EventCompaction, Error: info.Err, Info: info.String()})
			if info.Err != nil && pebble.IsCorruptionError(info.Err) {
				f.stopCompactions(info.Err)
			}
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			f.mu.Lock()
			f.stopped = true
			e := f.updateHalted()
			f.mu.Unlock()
			f.emit(Event{Kind: EventWriteStall, Info: info.String()})
			f.emitIf(e)
		},
		WriteStallEnd: func() {
			f.mu.Lock()
			f.stopped = false
			e := f.updateHalted()
			f.mu.Unlock()
			f.emit(Event{Kind: EventWriteStallEnd})
			f.emitIf(e)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			f.emit(Event{Kind: EventDiskSlow, Info: info.String()})
		},
		LowDiskSpace: func(info pebble.LowDiskSpaceInfo) {
			f.emit(Event{Kind: EventLowDiskSpace, Info: info.String()})
		},
	}
}

// fatalPanic carries a Fatalf from Pebble up to the store call it happened
// in.
type fatalPanic struct{ err error }

// recoverFatal turns a panic inside Pebble (a Fatalf, or Pebble's own
// panic on a broken commit pipeline) into an error of the call and fails
// the store. Use it deferred, in every store call that enters Pebble and
// may write or open files.
func (f *faults) recoverFatal(errp *error) {
	r := recover()
	if r == nil {
		return
	}
	var err error
	switch r := r.(type) {
	case fatalPanic:
		err = r.err
	case error:
		err = fmt.Errorf("pebble panicked: %w", r)
		f.fail(err)
	default:
		err = fmt.Errorf("pebble panicked: %v", r)
		f.fail(err)
	}
	*errp = f.wrap(err)
	if f.failed.Load() && !errors.Is(*errp, codec.ErrCorrupt) {
		*errp = f.failure()
	}
}

// Infof implements pebble.Logger: nothing, Pebble's events cover it.
func (f *faults) Infof(string, ...any) {}

// Errorf implements pebble.Logger: an "error" event, logged at Error
// when the store has a logger, and counted. Without a logger nothing is
// printed: a library does not write to its host's stderr, and what such
// an error costs reaches the caller anyway (an error from a call, refused
// writes) or shows in EngineMetrics.
func (f *faults) Errorf(format string, args ...any) {
	f.emit(Event{Kind: EventError, Info: fmt.Sprintf(format, args...)})
}

// Fatalf implements pebble.Logger: see faults.
func (f *faults) Fatalf(format string, args ...any) {
	err := fmt.Errorf("pebble: "+format, args...)
	if f.corruptLike(err) {
		err = fmt.Errorf("%w: %w", codec.ErrCorrupt, err)
	}
	f.fail(err)
	if onStoreCall() {
		panic(fatalPanic{err})
	}
	select {} // a background goroutine of Pebble's: never go on
}

func (f *faults) corruptLike(err error) bool {
	s := err.Error()
	return pebble.IsCorruptionError(err) || strings.Contains(s, "corrupt") || strings.Contains(s, "checksum")
}

// onStoreCall reports whether the calling goroutine is inside one of the
// store's calls, which recover a fatalPanic, rather than on a goroutine of
// Pebble's own. It is for the rare fatal path only.
func onStoreCall() bool {
	var pcs [64]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if strings.HasPrefix(fr.Function, pkgPath+".") && !strings.Contains(fr.Function, "(*faults)") {
			return true
		}
		if !more {
			return false
		}
	}
}

// pkgPath is this package's import path, read from one of its types so
// that moving the package cannot silently turn the check above off (a
// stale literal would match no frame, and every fatal error on a store
// call would hang the caller instead of unwinding it).
var pkgPath = reflect.TypeFor[Store]().PkgPath()

// readOnlyLockFS lets a read-only open go on without the directory lock
// when the file system is read-only (EROFS): Pebble creates LOCK to take
// it, and nothing can write to such a store anyway.
type readOnlyLockFS struct{ vfs.FS }

func (fs readOnlyLockFS) Lock(name string) (io.Closer, error) {
	l, err := fs.FS.Lock(name)
	if err != nil && errors.Is(err, syscall.EROFS) {
		return noLock{}, nil
	}
	return l, err
}

func (fs readOnlyLockFS) Unwrap() vfs.FS { return fs.FS }

type noLock struct{}

func (noLock) Close() error { return nil }
