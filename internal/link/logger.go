package link

import "log/slog"

// DB.Logger is the logger of a *tipkv.DB (Options.Logger). It is never
// nil: without a logger it is Discard, which discards everything cheaply
// (Enabled is false), so a package logs without checking.
//
// tipkv's packages log their own events through it, in the style of the
// store's engine events: a constant message starting with "tipkv: ", then
// the attribute "event" (a short kind), the names that locate it and the
// error, for example
//
//	db.Logger.LogAttrs(ctx, slog.LevelWarn, "tipkv: message dead-lettered",
//		slog.String("event", "dead-letter"), slog.String("queue", name),
//		slog.Int64("seq", seq), slog.Int("attempts", n))
//
// Levels: Debug for routine work, Info for what recovers by itself (a
// lease expired and the message is visible again), Warn for what needs a
// look (a message dead-lettered), Error for lost or unreadable data (a
// value that fails to decode, with its key).
//
// Discard is the logger that discards everything.
var Discard = slog.New(slog.DiscardHandler)
