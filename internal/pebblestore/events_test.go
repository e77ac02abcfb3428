package pebblestore_test

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

func TestEventLevels(t *testing.T) {
	failed := errors.New("boom")
	for _, c := range []struct {
		e    pebblestore.Event
		want slog.Level
	}{
		{pebblestore.Event{Kind: pebblestore.EventFlush}, slog.LevelDebug},
		{pebblestore.Event{Kind: pebblestore.EventCompaction}, slog.LevelDebug},
		{pebblestore.Event{Kind: pebblestore.EventFlush, Error: failed}, slog.LevelWarn},
		{pebblestore.Event{Kind: pebblestore.EventCompaction, Error: failed}, slog.LevelWarn},
		{pebblestore.Event{Kind: pebblestore.EventWriteStall}, slog.LevelWarn},
		{pebblestore.Event{Kind: pebblestore.EventWriteStallEnd}, slog.LevelInfo},
		{pebblestore.Event{Kind: pebblestore.EventDiskSlow}, slog.LevelWarn},
		{pebblestore.Event{Kind: pebblestore.EventLowDiskSpace}, slog.LevelWarn},
		{pebblestore.Event{Kind: pebblestore.EventBackgroundErr, Error: failed}, slog.LevelError},
		{pebblestore.Event{Kind: pebblestore.EventWritesRefused, Error: failed}, slog.LevelError},
		{pebblestore.Event{Kind: pebblestore.EventWritesResumed}, slog.LevelInfo},
		{pebblestore.Event{Kind: pebblestore.EventCorruption, Error: failed}, slog.LevelError},
		{pebblestore.Event{Kind: pebblestore.EventFatal, Error: failed}, slog.LevelError},
		{pebblestore.Event{Kind: pebblestore.EventError}, slog.LevelError},
	} {
		require.Equal(t, c.want, c.e.Level(), "%s (error %v)", c.e.Kind, c.e.Error)
	}
}

// slowSyncFS blocks every sync of a file while block is open.
type slowSyncFS struct {
	vfs.FS
	on    atomic.Bool
	block chan struct{}
}

func (fs *slowSyncFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, cat)
	return &slowSyncFile{File: f, fs: fs}, err
}

func (fs *slowSyncFS) ReuseForWrite(old, new string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, new, cat)
	return &slowSyncFile{File: f, fs: fs}, err
}

type slowSyncFile struct {
	vfs.File
	fs *slowSyncFS
}

func (f *slowSyncFile) wait() {
	if f.fs.on.Load() {
		<-f.fs.block
	}
}

func (f *slowSyncFile) Sync() error { f.wait(); return f.File.Sync() }
func (f *slowSyncFile) SyncData() error {
	f.wait()
	return f.File.SyncData()
}
func (f *slowSyncFile) SyncTo(length int64) (bool, error) {
	f.wait()
	return f.File.SyncTo(length)
}

// A sync that takes longer than DiskSlowThreshold is reported (an event,
// a Warn record, a count) while it is still blocked: the test waits for
// the event, not for a time.
func TestDiskSlow(t *testing.T) {
	fs := &slowSyncFS{FS: vfs.NewMem(), block: make(chan struct{})}
	events := make(chan string, 64)
	s, err := pebblestore.Open("db", pebblestore.Config{FS: fs, CacheSize: 8 << 20, DiskSlowThreshold: 10 * time.Millisecond,
		Events: func(e pebblestore.Event) {
			select {
			case events <- e.Kind:
			default:
			}
		}})
	require.NoError(t, err)
	defer s.Close()

	fs.on.Store(true)
	done := make(chan error, 1)
	go func() {
		b := s.NewBatch()
		defer b.Close()
		err := b.Set(vkey("c", "a", 1), []byte("v"))
		if err == nil {
			err = b.Apply(true)
		}
		if err == nil {
			err = b.Wait()
		}
		done <- err
	}()
	for k := range events {
		if k == pebblestore.EventDiskSlow {
			break
		}
	}
	fs.on.Store(false)
	close(fs.block)
	require.NoError(t, <-done)
	m, err := pebblestore.FiguresOf[level](s)
	require.NoError(t, err)
	require.Positive(t, m.DiskSlow)
}
