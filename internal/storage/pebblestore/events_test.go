package pebblestore_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
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
