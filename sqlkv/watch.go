package sqlkv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tipkv/tipkv/engine"
)

// Watch implements engine.Watcher.
//
// On PostgreSQL, a batch that writes a key of a notified family
// (Config.NotifyFamilies: by default document versions, queue state and
// feeds, the families Collection.Watch, a queue's Wait and Feed.Follow
// watch) sends one pg_notify on the table's channel, inside its
// transaction, naming the keys, or, for a batch that writes many, a range
// or the family (see listBudget); PostgreSQL delivers it at commit to
// every session listening then. Each store listens on one connection of
// its own, opened by the first Watch; a Watch on a range inside one
// notified family registers with it and is woken by the notifications
// that name a key, range or family overlapping its range, and every
// backstopPolls PollIntervals besides. LISTEN has completed before Watch
// returns, so no commit after that is missed. If the listening connection
// breaks, every such watch's channel closes (the caller reads again and
// watches again, which reconnects).
//
// Any other Watch (a range outside the notified families, such as a
// queue's items, a dialect without LISTEN, or NoWatch) wakes every
// PollInterval: the contract allows spurious wake-ups, and the caller's
// re-read finds what changed. So does a Watch made while the listening
// connection cannot be opened (within listenTimeout, whatever the caller's
// ctx: the connection serves every watch of the store, so one caller's
// short deadline must not cut it).
func (s *Store) Watch(ctx context.Context, lo, hi []byte) (<-chan struct{}, error) {
	if len(lo) == 0 || bytes.Compare(lo, hi) >= 0 {
		return nil, fmt.Errorf("%w: sqlkv: watch of an empty or unbounded range [%x, %x)", engine.ErrInvalid, lo, hi)
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	if s.cfg.NoWatch || !s.notifiedFamily(lo, hi) {
		return s.poll(ctx), nil
	}
	ch, err := s.hub.add(ctx, bytes.Clone(lo), bytes.Clone(hi))
	if err != nil && !errors.Is(err, engine.ErrClosed) {
		// No listening connection (the server is restarting, or too busy
		// to accept one in time): poll meanwhile; the next Watch tries to
		// listen again.
		return s.poll(ctx), nil
	}
	return ch, err
}

// notifiedFamily reports whether [lo, hi) lies inside one notified family.
func (s *Store) notifiedFamily(lo, hi []byte) bool {
	f := lo[0]
	if !s.notify[f] {
		return false
	}
	return f == 0xff || bytes.Compare(hi, []byte{f + 1}) <= 0
}

// poll returns a channel that receives every PollInterval until ctx ends
// or the store closes.
func (s *Store) poll(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		t := time.NewTicker(s.cfg.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.done:
				return
			case <-t.C:
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch
}

// hub dispatches the notifications of one listening connection to the
// watches registered with it.
type hub struct {
	s        *Store
	mu       sync.Mutex
	closed   bool
	l        *listener
	watchers map[*watcher]struct{}
}

type listener struct {
	conn   *pgx.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

type watcher struct {
	lo, hi []byte
	ch     chan struct{}
	l      *listener
}

// listenTimeout bounds the opening of the listening connection.
const listenTimeout = 10 * time.Second

func newHub(s *Store) *hub { return &hub{s: s, watchers: map[*watcher]struct{}{}} }

func (h *hub) add(ctx context.Context, lo, hi []byte) (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, engine.ErrClosed
	}
	if h.l == nil {
		lctx, cancel := context.WithTimeout(context.Background(), listenTimeout)
		l, err := h.listen(lctx)
		cancel()
		if err != nil {
			return nil, err
		}
		h.l = l
	}
	w := &watcher{lo: lo, hi: hi, ch: make(chan struct{}, 1), l: h.l}
	h.watchers[w] = struct{}{}
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.watchers[w]; ok {
			delete(h.watchers, w)
			close(w.ch)
		}
	})
	return w.ch, nil
}

// listen opens the listening connection and starts its loop. The caller
// holds h.mu.
func (h *hub) listen(ctx context.Context) (*listener, error) {
	conn, err := pgx.ConnectConfig(ctx, h.s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("sqlkv: watch: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{h.s.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("sqlkv: watch: listen: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &listener{conn: conn, cancel: cancel, done: make(chan struct{})}
	go h.loop(lctx, l)
	go h.backstop(lctx, l)
	return l, nil
}

// backstopPolls is how many PollIntervals a watch woken by notification
// sleeps at most: it wakes then anyway (a spurious wake-up the contract
// allows), so a writer that does not notify the family (a process
// configured with other NotifyFamilies, or of a version with another
// default, during a rolling upgrade) is seen within that time, not never.
const backstopPolls = 10

// backstop wakes every watch of l each backstopPolls PollIntervals until
// l ends.
func (h *hub) backstop(ctx context.Context, l *listener) {
	t := time.NewTicker(backstopPolls * h.s.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-t.C:
			h.mu.Lock()
			for w := range h.watchers {
				if w.l == l {
					select {
					case w.ch <- struct{}{}:
					default:
					}
				}
			}
			h.mu.Unlock()
		}
	}
}

func (h *hub) loop(ctx context.Context, l *listener) {
	defer close(l.done)
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			break
		}
		h.dispatch(n.Payload)
	}
	h.mu.Lock()
	for w := range h.watchers {
		if w.l == l {
			delete(h.watchers, w)
			close(w.ch)
		}
	}
	if h.l == l {
		h.l = nil
	}
	h.mu.Unlock()
	l.conn.Close(context.Background())
}

// dispatch wakes the watches whose range holds a key the payload names,
// or overlaps a range or family it names (see Store.payload).
func (h *hub) dispatch(payload string) {
	var keys [][]byte
	var ranges [][2][]byte
	all := payload == "*"
	if !all {
		for _, e := range strings.Split(payload, ",") {
			switch {
			case strings.HasPrefix(e, "k"):
				k, err := hex.DecodeString(e[1:])
				if err != nil {
					all = true
				}
				keys = append(keys, k)
			case strings.HasPrefix(e, "f"):
				f, err := hex.DecodeString(e[1:])
				if err != nil || len(f) != 1 {
					all = true
					continue
				}
				var hi []byte // family 0xff: every key from 0xff up
				if f[0] < 0xff {
					hi = []byte{f[0] + 1}
				}
				ranges = append(ranges, [2][]byte{f, hi})
			case strings.HasPrefix(e, "r"):
				lo, hi, _ := strings.Cut(e[1:], "-")
				a, err1 := hex.DecodeString(lo)
				b, err2 := hex.DecodeString(hi)
				if err1 != nil || err2 != nil {
					all = true
				}
				ranges = append(ranges, [2][]byte{a, b})
			default:
				all = true // a payload of a newer version: wake everyone
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		if all || w.wants(keys, ranges) {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (w *watcher) wants(keys [][]byte, ranges [][2][]byte) bool {
	for _, k := range keys {
		if bytes.Compare(w.lo, k) <= 0 && bytes.Compare(k, w.hi) < 0 {
			return true
		}
	}
	for _, r := range ranges {
		if bytes.Compare(r[0], w.hi) < 0 && (r[1] == nil || bytes.Compare(r[1], w.lo) > 0) {
			return true
		}
	}
	return false
}

// close ends every watch and the listening connection.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	l := h.l
	for w := range h.watchers {
		delete(h.watchers, w)
		close(w.ch)
	}
	h.mu.Unlock()
	if l != nil {
		l.cancel()
		<-l.done
	}
}
