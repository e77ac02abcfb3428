package versioned

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
)

type backgroundKey struct{ key any }

// background runs pass now and then every interval (0: a minute) in a
// goroutine of its own, until db closes: Close cancels the pass under way
// (each pass stops between two documents or streams) and waits for it.
// There is one job per key and DB: a second call with the same key (another
// handle on the same collection, say) starts nothing, so handles stay cheap
// to make.
// Each pass is logged as msg at Debug with pass's attributes, a failed one
// as msg+" failed" at Warn; the next pass comes an interval later either
// way.
func background(db *tipkv.DB, key any, interval time.Duration, msg string, pass func(context.Context) ([]slog.Attr, error)) error {
	ln, err := link.Of(db)
	if err != nil {
		return err
	}
	reg := &ln.Services
	first := false
	reg.Get(backgroundKey{key}, func() any { first = true; return struct{}{} })
	if !first {
		return nil
	}
	if interval == 0 {
		interval = time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	reg.OnClose(func() {
		cancel()
		<-done
	})
	log := ln.Logger
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			start := time.Now()
			attrs, err := pass(ctx)
			switch {
			case ctx.Err() != nil, errors.Is(err, tipkv.ErrClosed):
				return
			case err != nil:
				log.LogAttrs(ctx, slog.LevelWarn, msg+" failed", append(attrs, slog.Any("error", err))...)
			default:
				log.LogAttrs(ctx, slog.LevelDebug, msg, append(attrs, slog.Duration("took", time.Since(start)))...)
			}
			t.Reset(interval)
		}
	}()
	return nil
}
