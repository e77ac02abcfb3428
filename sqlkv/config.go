package sqlkv

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// Dialect is the SQL engine behind the connection. The wire protocol is
// PostgreSQL's for all three; what differs is the table's DDL, the
// isolation levels on offer, change notification, advisory locks and the
// error codes of an ambiguous commit.
type Dialect int

const (
	// Postgres is PostgreSQL 13 or newer: tested here, for real.
	Postgres Dialect = iota
	// Yugabyte is YugabyteDB's YSQL: the key is range-sharded (PRIMARY KEY
	// (k ASC)), there is no LISTEN/NOTIFY by default (waits poll) and no
	// advisory lock, so a batch that requires a range to be empty runs
	// SERIALIZABLE. On paper: not tested here.
	Yugabyte
	// Cockroach is CockroachDB: SERIALIZABLE by default, no LISTEN/NOTIFY,
	// and error 40003 for a commit whose outcome is unknown. On paper: not
	// tested here. Its licence is proprietary since 24.3; it is a dialect
	// row, not a recommendation.
	Cockroach
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case Yugabyte:
		return "yugabyte"
	case Cockroach:
		return "cockroach"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Isolation is how a batch's conditions are made atomic with its writes.
type Isolation int

const (
	// IsolationDefault is ReadCommitted, except on Cockroach, where it is
	// Serializable.
	IsolationDefault Isolation = iota
	// ReadCommitted runs batches at READ COMMITTED and makes each condition
	// hold until the commit with a lock: a row lock for Present and Equals,
	// a unique insert for Absent, and for RangeEmpty, which has no row to
	// lock, a transaction-scoped advisory lock on the range's key prefix
	// that every batch writing under that prefix takes in shared mode (a
	// range wider than one prefix locks the table against writers for the
	// batch). Batches on disjoint keys never conflict.
	ReadCommitted
	// Serializable runs every batch at SERIALIZABLE: the engine finds the
	// conflicts, including some that are not (PostgreSQL locks what a
	// batch read by index page, so neighbouring keys conflict), which
	// fail as ErrConditionFailed and are retried. On a server that flushes
	// its WAL at commit, a third of the batches of six writers on disjoint
	// keys were retried, one of them 10 times (tipkv's default
	// Options.MaxRetries): raise MaxRetries with this mapping.
	Serializable
	// RepeatableRead runs batches at REPEATABLE READ (snapshot isolation),
	// as YugabyteDB does without yb_enable_read_committed_isolation: a row
	// lock on a row changed since the snapshot fails the batch. A batch
	// with a RangeEmpty condition locks the table against writers before
	// its snapshot is taken on PostgreSQL, and runs SERIALIZABLE on the
	// other dialects.
	RepeatableRead
)

func (i Isolation) String() string {
	switch i {
	case IsolationDefault:
		return "default"
	case ReadCommitted:
		return "read committed"
	case Serializable:
		return "serializable"
	case RepeatableRead:
		return "repeatable read"
	}
	return fmt.Sprintf("Isolation(%d)", int(i))
}

// Config is how a store is opened. A zero field means its default.
type Config struct {
	// DSN is the connection string (a URL or key=value pairs, as pgx
	// parses them), used when Pool is nil. The store owns the pool it
	// makes and closes it at Close.
	DSN string
	// Pool, if set, is used instead of DSN. The caller owns it: Close
	// leaves it open. Close the store before the pool: the store may hold
	// a few of its connections (finished read views, see Reads in the
	// README) until it closes, and the pool's Close waits for them.
	Pool *pgxpool.Pool
	// Table is the table's name, optionally schema-qualified
	// ("schema.table"). It is created if missing. The default is "tipkv".
	Table string
	// Dialect is the engine. The default is Postgres.
	Dialect Dialect
	// Isolation maps conditions to the engine. The default is
	// ReadCommitted (Serializable on Cockroach).
	Isolation Isolation
	// NoWatch turns change notification off for this store's waits: they
	// poll every PollInterval. The store still notifies its writes, for
	// the processes that watch. Dialects without LISTEN/NOTIFY always
	// poll.
	NoWatch bool
	// NotifyFamilies are the key families whose writes send a
	// notification: one pg_notify per commit that writes any of them, on
	// the table's one channel, naming the keys written (a range per
	// family, or the family alone, when a batch writes many; see
	// listBudget). A Watch on a range inside these families is woken by
	// notifications (and, as a backstop, every 10 PollIntervals); any
	// other Watch wakes every PollInterval (spurious wake-ups the contract
	// allows).
	//
	// The default is every family a follower waits on: document versions
	// (0x01, Collection.Watch), queue state (0x03, a queue's Wait: the
	// tail every enqueue writes) and feeds (0x04, Feed.Follow), so that
	// followers in other processes wake at a commit rather than at the
	// next poll. Until this release the default was queue state alone,
	// and Follow and Watch polled every PollInterval (100 ms).
	//
	// The cost: PostgreSQL (15, as tested here) takes one cluster-wide
	// lock at the commit of a transaction that notified and holds it until
	// the commit is done, its WAL flush included, so notifying commits
	// are serialised with each other at that step.
	// Issue 17 measured 31-36% of write throughput when every write
	// notified; BENCHMARKS.md (sqlkv) has the paired figure for the new
	// default. A store whose documents and feeds nobody follows across
	// processes can narrow the list to codec.FamilyQueueState (the old
	// default) and get that throughput back; its Follow and Watch then
	// poll. Every process on one table must use the same families (a
	// watcher whose family another process writes without notifying sees
	// those writes only at the backstop); an empty, non-nil list notifies
	// nothing.
	NotifyFamilies []codec.Family
	// PollInterval is how often a wait polls when there is no
	// notification. The default is 100 ms.
	PollInterval time.Duration
	// MaxBatchOps, MaxBatchBytes and MaxValueSize override the dialect's
	// limits (Limits) when set.
	MaxBatchOps, MaxBatchBytes, MaxValueSize int
	// ClockSkew is the margin allowed between the clocks of the processes
	// sharing the table (see engine.Caps). The default is 500 ms.
	ClockSkew time.Duration
	// MaxConns is the size of the pool the store makes from DSN, unless
	// the DSN sets pool_max_conns. Every iterator or snapshot still open
	// holds one connection. The default is 16.
	MaxConns int32
}

// Limits returns a dialect's default limits. PostgreSQL's come from
// keeping one batch one pipeline of reasonable size (a field may hold up
// to 1 GB); YugabyteDB's and CockroachDB's from their advice on row and
// transaction sizes (values up to a few MiB; large transactions slow
// every reader of their keys).
func Limits(d Dialect) (ops, bytes, value int) {
	switch d {
	case Yugabyte:
		return 10_000, 32 << 20, 4 << 20
	case Cockroach:
		return 10_000, 32 << 20, 4 << 20
	}
	return 10_000, 64 << 20, 16 << 20
}

func (c Config) withDefaults() (Config, error) {
	if c.Table == "" {
		c.Table = "tipkv"
	}
	if c.Dialect < Postgres || c.Dialect > Cockroach {
		return c, fmt.Errorf("%w: sqlkv: unknown dialect %d", engine.ErrInvalid, c.Dialect)
	}
	if c.Isolation == IsolationDefault {
		c.Isolation = ReadCommitted
		if c.Dialect == Cockroach {
			c.Isolation = Serializable
		}
	}
	if c.Isolation < ReadCommitted || c.Isolation > RepeatableRead {
		return c, fmt.Errorf("%w: sqlkv: unknown isolation %d", engine.ErrInvalid, c.Isolation)
	}
	if c.Dialect != Postgres {
		c.NoWatch = true // no LISTEN/NOTIFY (YugabyteDB's is behind an early-access flag)
	}
	if c.NotifyFamilies == nil {
		c.NotifyFamilies = []codec.Family{codec.FamilyVersions, codec.FamilyQueueState, codec.FamilyFeed}
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	ops, bytes, value := Limits(c.Dialect)
	if c.MaxBatchOps <= 0 {
		c.MaxBatchOps = ops
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = bytes
	}
	if c.MaxValueSize <= 0 {
		c.MaxValueSize = min(value, c.MaxBatchBytes)
	}
	if c.ClockSkew <= 0 {
		c.ClockSkew = 500 * time.Millisecond
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 16
	}
	return c, nil
}

// ident quotes a possibly schema-qualified table name.
func ident(table string) (string, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: sqlkv: table name %q has more than one dot", engine.ErrInvalid, table)
	}
	for _, p := range parts {
		if p == "" || len(p) > 63 {
			return "", fmt.Errorf("%w: sqlkv: bad table name %q", engine.ErrInvalid, table)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}
