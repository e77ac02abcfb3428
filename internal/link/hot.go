package link

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// Hot keys on an engine that can lock (engine.Locker): writers of one
// document, stream or queue state that collided wait their turn instead
// of racing again.
//
// A write reads, then commits on the condition that what it read still
// holds. When a commit fails a condition the engine names
// (engine.ConditionError), the write takes the lock of the key's prefix
// (the wait for it is the write's pause) and runs again holding it, until
// it commits or gives up: writers that collided on one key then read and
// commit it in turn. Every write tells its batch which locks it holds
// (engine.LockHolding), and the engine fails the commit of a write that
// does not hold a lock another writer holds or waits for, so a writer
// that has not collided yet joins the queue instead of overtaking the
// holder, which would then fail again. The locks are advisory; the
// conditions still decide every commit. Cold keys cost nothing: no lock,
// and the check rides in the commit.

// lockSet is the locks one write holds: sorted prefixes, and what
// releases them.
type lockSet struct {
	prefixes [][]byte
	unlock   func()
}

func (l *lockSet) holds(p []byte) bool {
	_, ok := slices.BinarySearchFunc(l.prefixes, p, bytes.Compare)
	return ok
}

// holdsAll reports whether l holds the lock of every prefix in ps.
func (l *lockSet) holdsAll(ps [][]byte) bool {
	for _, p := range ps {
		if !l.holds(p) {
			return false
		}
	}
	return true
}

func (l *lockSet) release() {
	if l.unlock != nil {
		l.unlock()
	}
	l.prefixes, l.unlock = nil, nil
}

// lock makes ls hold the locks of want too: it releases what ls holds and
// takes the whole set in one call (locks taken one at a time could
// deadlock). It reports false when the engine cannot lock; ls then holds
// nothing.
func (db *DB) lock(lk engine.Locker, ls *lockSet, want [][]byte) bool {
	all := slices.Clone(ls.prefixes)
	grew := false
	for _, p := range want {
		if !ls.holds(p) && !slices.ContainsFunc(all, func(q []byte) bool { return bytes.Equal(p, q) }) {
			all, grew = append(all, p), true
		}
	}
	if !grew {
		return true
	}
	slices.SortFunc(all, bytes.Compare)
	ls.release()
	unlock, _, err := lk.Lock(context.Background(), all)
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			db.Logger.Warn("tipkv: lock of hot keys failed; writing without", "err", err)
		}
		return false
	}
	ls.prefixes, ls.unlock = all, unlock
	return true
}

// conflictPrefixes returns the prefixes of the keys a failed condition
// names, if the engine named them.
func conflictPrefixes(err error) [][]byte {
	var ce *engine.ConditionError
	if !errors.As(err, &ce) {
		return nil
	}
	out := make([][]byte, 0, len(ce.Keys))
	for _, k := range ce.Keys {
		if len(k) > 0 {
			out = append(out, engine.LockPrefix(k))
		}
	}
	return out
}

// describeKey names what a key belongs to, for errors: "stream \"s\"",
// "document \"c\"/\"id\"", "queue \"q\"", or its bytes in hex.
func describeKey(k []byte) string {
	f, rest, err := codec.DecodeFamily(k)
	if err != nil {
		return fmt.Sprintf("key %x", k)
	}
	name := func(what string, n int) string {
		parts := make([]string, 0, n)
		for range n {
			var s string
			if s, rest, err = codec.DecodeString(rest); err != nil {
				return fmt.Sprintf("key %x", k)
			}
			parts = append(parts, fmt.Sprintf("%q", s))
		}
		out := what
		for i, p := range parts {
			if i == 0 {
				out += " " + p
			} else {
				out += "/" + p
			}
		}
		return out
	}
	switch f {
	case codec.FamilyVersions:
		return name("document", 2)
	case codec.FamilyFeed:
		return name("stream", 1)
	case codec.FamilyQueueItems, codec.FamilyQueueState, codec.FamilyDeadLetters, codec.FamilyQueueControl:
		return name("queue", 1)
	case codec.FamilyFeedCursors:
		return name("stream cursor", 2)
	case codec.FamilyFeedLeases:
		return name("stream group lease", 2)
	}
	return fmt.Sprintf("key %x", k)
}

// conflictOn names what a failed condition was on, when the engine said.
func conflictOn(err error) string {
	var ce *engine.ConditionError
	if !errors.As(err, &ce) || len(ce.Keys) == 0 {
		return ""
	}
	s := describeKey(ce.Keys[0])
	if len(ce.Keys) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(ce.Keys)-1)
	}
	return s
}
