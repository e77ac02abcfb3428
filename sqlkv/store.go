package sqlkv

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
)

// Open opens the table that cfg names (creating it if missing) and returns
// a *tipkv.DB on it, in shared mode: several processes may open the same
// table. opts is as for tipkv.Open (its engine fields are ignored) and may
// be nil. Closing the DB closes the store, and the pool if the store made
// it.
func Open(ctx context.Context, cfg Config, opts *tipkv.Options) (*tipkv.DB, error) {
	s, err := NewStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	db, err := tipkv.OpenEngine(s, s.Name(), opts)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return db, nil
}

// Store is an engine.Store on one SQL table (k bytea PRIMARY KEY, v bytea).
// It is safe for concurrent use.
type Store struct {
	cfg     Config
	pool    *pgxpool.Pool
	ownPool bool
	table   string // quoted
	q       queries
	salt    uint64 // mixed into advisory lock ids: one table's locks are not another's
	channel string // the LISTEN/NOTIFY channel of the table
	notify  [256]bool

	mu         sync.RWMutex // guards closed against enter
	closed     bool
	closedFlag atomic.Bool    // closed, for readers that do not lock
	calls      sync.WaitGroup // calls in flight, and background commits of read views
	holders    map[*holder]struct{}
	hmu        sync.Mutex
	hub        *hub
	done       chan struct{} // closed by Close: ends polling watches

	pmu       sync.Mutex // guards the parked read views (park.go)
	parked    []parkedConn
	maxParked int
	parkFor   time.Duration
	ptimer    *time.Timer
	pclosed   bool

	plocks procLocks // writers' prefix locks queued in this process (lock.go)
}

var (
	_ engine.Store   = (*Store)(nil)
	_ engine.Admin   = (*Store)(nil)
	_ engine.Watcher = (*Store)(nil)
	_ engine.Sizer   = (*Store)(nil)
	_ engine.Sizer   = (*snapshot)(nil)
)

// NewStore opens the table that cfg names, creating it if missing, and
// returns the store alone (Open wraps it in a *tipkv.DB).
func NewStore(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := ident(cfg.Table)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, pool: cfg.Pool, table: t, q: newQueries(t, cfg.Dialect), holders: map[*holder]struct{}{}, done: make(chan struct{})}
	h := fnv.New64a()
	h.Write([]byte(t))
	s.salt = h.Sum64()
	s.channel = fmt.Sprintf("tipkv_%016x", s.salt)
	for _, f := range cfg.NotifyFamilies {
		s.notify[f] = true
	}
	if s.pool == nil {
		pc, err := pgxpool.ParseConfig(cfg.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: sqlkv: %v", engine.ErrInvalid, err)
		}
		if !strings.Contains(cfg.DSN, "pool_max_conns") {
			pc.MaxConns = cfg.MaxConns
		}
		s.pool, err = pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("sqlkv: connect: %w", err)
		}
		s.ownPool = true
	}
	s.hub = newHub(s)
	s.maxParked = max(1, min(maxParked, int(s.pool.Config().MaxConns)/4))
	s.parkFor = parkFor
	if err := s.createTable(ctx); err != nil {
		if s.ownPool {
			s.pool.Close()
		}
		return nil, err
	}
	return s, nil
}

// createTable creates the table if it is missing. Two processes creating
// it at once can collide in the catalog (a unique violation on pg_type);
// the loser finds the table there and goes on.
func (s *Store) createTable(ctx context.Context) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, s.q.tableExists, s.table).Scan(&exists); err != nil && s.cfg.Dialect != Cockroach {
		return fmt.Errorf("sqlkv: open %s: %w", s.cfg.Table, err)
	}
	if exists {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.q.createTable); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07") {
			return nil
		}
		return fmt.Errorf("sqlkv: create table %s: %w", s.cfg.Table, err)
	}
	return nil
}

// Name is the table's name, as configured.
func (s *Store) Name() string { return s.cfg.Table }

// Pool returns the connection pool (for tests and tools).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Config returns the configuration in force, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Caps implements engine.Store.
func (s *Store) Caps() engine.Caps {
	c := engine.Caps{
		Shared:        true,
		Watch:         !s.cfg.NoWatch,
		MaxBatchOps:   s.cfg.MaxBatchOps,
		MaxBatchBytes: s.cfg.MaxBatchBytes,
		MaxValueSize:  s.cfg.MaxValueSize,
		ClockSkew:     s.cfg.ClockSkew,
	}
	if !c.Watch {
		c.PollInterval = s.cfg.PollInterval
	}
	return c
}

// enter lets a call in, or returns ErrClosed. Every enter is paired with
// an exit.
func (s *Store) enter() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return engine.ErrClosed
	}
	s.calls.Add(1)
	return nil
}

func (s *Store) exit() { s.calls.Done() }

// Get implements engine.Store.
func (s *Store) Get(key []byte) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return s.get(context.Background(), s.pool, key)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) get(ctx context.Context, q querier, key []byte) ([]byte, error) {
	var v []byte
	err := q.QueryRow(ctx, s.q.get, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlkv: get %x: %w", key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// NewIter implements engine.Store. The iterator reads one REPEATABLE READ
// transaction, begun with its first page; see iter.
func (s *Store) NewIter(lo, hi []byte) (engine.Iter, error) { return s.NewIterN(lo, hi, 0) }

// NewIterN implements engine.Sizer: the iterator's first page holds n
// rows (up to 1,024), so a read that wants n keys is one statement.
func (s *Store) NewIterN(lo, hi []byte, n int) (engine.Iter, error) {
	if len(lo) == 0 || hi == nil {
		return nil, fmt.Errorf("%w: sqlkv: unbounded iterator [%x, %x)", engine.ErrInvalid, lo, hi)
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return newIter(s, nil, lo, hi, n), nil
}

// NewSnapshot implements engine.Store: a REPEATABLE READ, read-only
// transaction on a connection of its own, whose snapshot is taken before
// NewSnapshot returns. It holds that connection, and holds back the
// vacuuming of rows deleted after it, until Close.
func (s *Store) NewSnapshot() (engine.Snapshot, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	h, err := s.beginRead(context.Background(), nil)
	if err != nil {
		return nil, err
	}
	return &snapshot{s: s, h: h}, nil
}

// NewBatch implements engine.Store.
func (s *Store) NewBatch() engine.Batch { return &batch{s: s} }

// Close implements engine.Store. It waits for calls in flight, ends open
// iterators and snapshots (their next call reports ErrClosed) and watches
// (their channels close), and closes the pool if the store made it.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return engine.ErrClosed
	}
	s.closed = true
	s.closedFlag.Store(true)
	s.mu.Unlock()
	close(s.done)
	s.hub.close()
	s.calls.Wait()
	s.hmu.Lock()
	hs := make([]*holder, 0, len(s.holders))
	for h := range s.holders {
		hs = append(hs, h)
	}
	s.hmu.Unlock()
	for _, h := range hs {
		h.kill()
	}
	s.calls.Wait() // background commits started by iterators
	s.closeParked()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// lockID is the advisory lock that guards the keys under prefix p.
func (s *Store) lockID(p []byte) int64 {
	h := fnv.New64a()
	var salt [8]byte
	for i := range salt {
		salt[i] = byte(s.salt >> (8 * i))
	}
	h.Write(salt[:])
	h.Write(p)
	return int64(h.Sum64())
}
