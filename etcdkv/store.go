package etcdkv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Config is how a store reaches its etcd cluster. The zero value of every
// field but Endpoints (or Client) is valid.
type Config struct {
	// Endpoints are the cluster's client URLs (http://host:2379). Ignored
	// when Client is set.
	Endpoints []string

	// Namespace is prepended to every key, so several stores share one
	// cluster without seeing each other's keys. End it with a separator
	// ("/tipkv/orders/"): two namespaces of which one is a prefix of the
	// other would overlap. The default is no prefix: the store owns the
	// cluster's whole key space.
	Namespace string

	// TLS, if set, is the client's TLS configuration. Ignored when Client
	// is set.
	TLS *tls.Config

	// Username and Password authenticate to a cluster with auth enabled.
	// Ignored when Client is set.
	Username, Password string

	// DialTimeout bounds the first connection. Ignored when Client is set.
	// The default is 5 s.
	DialTimeout time.Duration

	// RequestTimeout bounds every request the store sends. A commit that
	// reaches it is an unknown outcome (engine.ErrUnknownOutcome). Keep
	// it above the server's own proposal timeout (5 s plus two election
	// timeouts on a default cluster) so that the server, which knows more,
	// answers first. The default is 10 s.
	RequestTimeout time.Duration

	// MaxTxnOps is the server's --max-txn-ops: the most writes, and
	// separately the most conditions, one batch may hold once normalised.
	// The default is 128, etcd's default.
	MaxTxnOps int

	// MaxRequestBytes is the server's --max-request-bytes. A batch's keys,
	// values and conditions may take it, less a margin for the request's
	// framing (Store.Caps says how much). The default is 1.5 MiB, etcd's
	// default.
	MaxRequestBytes int

	// ClockSkew is the margin the processes sharing the store allow between
	// their clocks (engine.Caps.ClockSkew): a lease stored by one process
	// is taken over by another only ClockSkew after it ended. The default
	// is 1 s.
	ClockSkew time.Duration

	// PageSize is the most keys one page of an iterator fetches. Pages
	// start at 1 key after every seek and double up to PageSize. The
	// default is 256.
	PageSize int

	// LockTTL is how long the locks of a store whose process died, or
	// lost the cluster, hold other writers up (the lease of its lock
	// session, kept alive meanwhile; see Store.Lock). Rounded up to whole
	// seconds. The default is 10 s.
	LockTTL time.Duration

	// Client, if set, is used instead of dialling Endpoints; the store does
	// not close it. Where MaxRequestBytes is over 1.5 MiB, give the client
	// a MaxCallSendMsgSize above it (its default is 2 MiB).
	Client *clientv3.Client

	// Logger receives the etcd client's logs. The default discards them.
	Logger *zap.Logger
}

// Defaults of Config.
const (
	DefaultDialTimeout     = 5 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 3 << 19 // 1.5 MiB
	DefaultClockSkew       = time.Second
	DefaultPageSize        = 256
	DefaultLockTTL         = 10 * time.Second
)

func (c Config) withDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxTxnOps <= 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.ClockSkew <= 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	if c.LockTTL <= 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Open connects to the cluster and returns a tipkv DB on it: versioned/ and
// queue/ work on it as on a local store, in their shared mode. ctx bounds
// the connection and the first reads. opts is as for tipkv.Open and may be
// nil; its Pebble fields (InMemory, CacheSize, MemTableSize) are
// ignored and NoSync changes nothing (a commit is synced on a quorum). Close
// the DB when done; it closes the store (and the client, unless
// Config.Client was given).
func Open(ctx context.Context, cfg Config, opts *tipkv.Options) (*tipkv.DB, error) {
	s, err := NewStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	name := "etcd:" + strings.Join(s.c.Endpoints(), ",") + "/" + cfg.Namespace
	db, err := tipkv.OpenEngine(s, name, opts)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("tipkv: open %s: %w", name, err)
	}
	return db, nil
}

// Store is an engine.Store on an etcd v3 cluster. It is safe for concurrent
// use, and several Stores, in this process or others, may share one
// namespace: that is what it is for.
type Store struct {
	c    *clientv3.Client
	own  bool // the store dialled c and closes it
	ns   []byte
	cfg  Config
	caps engine.Caps

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu       sync.RWMutex // guards closed against wg.Add
	closed   bool
	isClosed atomic.Bool
	wg       sync.WaitGroup // calls and watches in flight

	lmu    sync.Mutex           // guards sess
	sess   *concurrency.Session // the lock session (lock.go), made at the first Lock
	plocks procLocks            // the process's lock queues (lock.go)

	onPage func(limit, got int) // tests: hears every page an iterator reads
}

var (
	_ engine.Store   = (*Store)(nil)
	_ engine.Sizer   = (*Store)(nil)
	_ engine.Watcher = (*Store)(nil)
	_ engine.Admin   = (*Store)(nil)
	_ engine.Locker  = (*Store)(nil)
	_ engine.Sizer   = (*snapshot)(nil)
)

// NewStore connects to the cluster (or takes cfg.Client) and checks that it
// answers a read within ctx.
func NewStore(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	c, own := cfg.Client, false
	if c == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, fmt.Errorf("%w: etcdkv: no endpoints", engine.ErrInvalid)
		}
		var err error
		c, err = clientv3.New(clientv3.Config{
			Endpoints:   cfg.Endpoints,
			DialTimeout: cfg.DialTimeout,
			TLS:         cfg.TLS,
			Username:    cfg.Username,
			Password:    cfg.Password,
			Logger:      cfg.Logger,
			// The server takes requests of up to MaxRequestBytes plus
			// its gRPC framing; the client's default cap is 2 MiB.
			MaxCallSendMsgSize: cfg.MaxRequestBytes + 512<<10,
		})
		if err != nil {
			return nil, fmt.Errorf("tipkv: etcd: connect to %v: %w", cfg.Endpoints, err)
		}
		own = true
	}
	s := &Store{c: c, own: own, ns: []byte(cfg.Namespace), cfg: cfg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.caps = engine.Caps{
		Shared:        true,
		Watch:         true,
		MaxBatchOps:   cfg.MaxTxnOps,
		MaxBatchBytes: maxBatchBytes(cfg),
		ClockSkew:     cfg.ClockSkew,
	}
	if s.caps.MaxBatchBytes <= 0 {
		s.close()
		return nil, fmt.Errorf("%w: etcdkv: MaxRequestBytes %d leaves no room for %d ops", engine.ErrInvalid, cfg.MaxRequestBytes, cfg.MaxTxnOps)
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	if _, err := c.Get(rctx, s.key(probe), clientv3.WithCountOnly()); err != nil {
		s.close()
		return nil, fmt.Errorf("tipkv: etcd: %v: %w", c.Endpoints(), err)
	}
	return s, nil
}

// probe is a key a read of the revision names (etcd refuses an empty key,
// and the namespace may be empty): the start of tipkv's metadata family.
var probe = []byte{0}

// Per-request and per-op framing that a batch's bytes do not count: the
// raft entry's header (request id, user name, auth revision) and, per op
// or condition, protobuf tags and lengths (at most 16 bytes for a put of
// up to 2 MiB, 24 for a compare) plus the namespace on each key and end.
const (
	requestOverhead = 1 << 10
	opOverhead      = 24
)

// maxBatchBytes is what a batch's keys, values and conditions may take so
// that a txn of MaxTxnOps writes and MaxTxnOps compares always fits in
// MaxRequestBytes.
func maxBatchBytes(cfg Config) int {
	perOp := opOverhead + 2*len(cfg.Namespace)
	return cfg.MaxRequestBytes - requestOverhead - len(cfg.Username) - 2*cfg.MaxTxnOps*perOp
}

// Namespace returns the store's key prefix (Config.Namespace).
func (s *Store) Namespace() string { return string(s.ns) }

// Client returns the store's etcd client.
func (s *Store) Client() *clientv3.Client { return s.c }

// Caps implements engine.Store: shared, with Watch, and etcd's limits.
func (s *Store) Caps() engine.Caps { return s.caps }

// key returns the etcd key of k: the namespace, then k.
func (s *Store) key(k []byte) string {
	b := make([]byte, 0, len(s.ns)+len(k))
	return string(append(append(b, s.ns...), k...))
}

// enter lets a call in, or says the store is closed. Every call that
// enters exits.
func (s *Store) enter() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return engine.ErrClosed
	}
	s.wg.Add(1)
	return nil
}

func (s *Store) exit() { s.wg.Done() }

// reqCtx is the context of one request: it ends with the store, or after
// RequestTimeout.
func (s *Store) reqCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
}

// readErr describes a failed read. Reads change nothing, so the client
// has already retried what it safely could.
func (s *Store) readErr(what string, err error) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("tipkv: etcd: %s: %w", what, engine.ErrClosed)
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("tipkv: etcd: %s: %w", what, ErrCompacted)
	}
	return fmt.Errorf("tipkv: etcd: %s: %w", what, err)
}

// Get implements engine.Store: a linearizable read of key.
func (s *Store) Get(key []byte) ([]byte, error) { return s.get(key, 0) }

func (s *Store) get(key []byte, rev int64) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	ctx, cancel := s.reqCtx()
	defer cancel()
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.c.Get(ctx, s.key(key), opts...)
	if err != nil {
		return nil, s.readErr(fmt.Sprintf("get %x", key), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, engine.ErrNotFound
	}
	v := resp.Kvs[0].Value // unmarshalled for this call: the caller's own
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// NewIter implements engine.Store. The iterator reads at one revision:
// the one current at its first page.
func (s *Store) NewIter(lo, hi []byte) (engine.Iter, error) { return s.newIter(lo, hi, 0, 0) }

// NewIterN implements engine.Sizer: NewIter whose first page reads n keys
// (up to Config.PageSize) instead of one, for a reader that knows it wants
// about n (a queue receiving n messages): one round trip instead of
// log2(n).
func (s *Store) NewIterN(lo, hi []byte, n int) (engine.Iter, error) {
	return s.newIter(lo, hi, 0, n)
}

// NewSnapshot implements engine.Store: the view at the current revision.
// It holds nothing on the server, so it is cheap to keep; but once the
// cluster compacts past its revision its reads fail with ErrCompacted.
func (s *Store) NewSnapshot() (engine.Snapshot, error) {
	rev, err := s.Revision(context.Background())
	if err != nil {
		return nil, err
	}
	return &snapshot{s: s, rev: rev}, nil
}

// Revision returns the cluster's current revision, by a linearizable read.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.exit()
	rctx, cancel := s.reqCtx()
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	resp, err := s.c.Get(rctx, s.key(probe), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.readErr("read the revision", err)
	}
	return resp.Header.Revision, nil
}

// Close implements engine.Store. It cancels the requests in flight (a
// commit among them fails with an error matching both ErrClosed and
// ErrUnknownOutcome) and waits for locks (Lock fails with ErrClosed), waits
// for them, ends every watch, revokes the lease of the store's locks and,
// unless the client was given in Config, closes the client. Iterators and snapshots
// still open report ErrClosed at their next call.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return engine.ErrClosed
	}
	s.closed = true
	s.isClosed.Store(true)
	s.mu.Unlock()
	return s.close()
}

func (s *Store) close() error {
	s.cancel()
	s.wg.Wait()
	s.closeSession()
	if s.own {
		return s.c.Close()
	}
	return nil
}

// snapshot is a view at one revision.
type snapshot struct {
	s      *Store
	rev    int64
	closed atomic.Bool
}

func (sn *snapshot) Get(key []byte) ([]byte, error) {
	if sn.closed.Load() {
		return nil, engine.ErrClosed
	}
	return sn.s.get(key, sn.rev)
}

func (sn *snapshot) NewIter(lo, hi []byte) (engine.Iter, error) { return sn.NewIterN(lo, hi, 0) }

func (sn *snapshot) NewIterN(lo, hi []byte, n int) (engine.Iter, error) {
	if sn.closed.Load() {
		return nil, engine.ErrClosed
	}
	return sn.s.newIter(lo, hi, sn.rev, n)
}

func (sn *snapshot) Close() error {
	sn.closed.Store(true)
	return nil
}
