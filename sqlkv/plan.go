package sqlkv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// A batch becomes one transaction, sent as one pipeline (one round trip
// once the connection has prepared the statements):
//
//	BEGIN ISOLATION LEVEL ...
//	[give way to writer locks the batch does not hold] see giveWay
//	[LOCK TABLE, or advisory locks on key prefixes]   see guard
//	RangeEmpty checks, several in one statement        1/(1-count(*))
//	Present and Equals checks, by key, locking rows    1/count(*)
//	Absent placeholders, by key                        INSERT (k) VALUES ($1)
//	the writes, in order                               runs of Sets or Deletes merged
//	DELETE the placeholders nothing overwrote
//	[pg_notify]
//	COMMIT
//
// A failed check divides by zero (22012) or, for Absent, violates the
// primary key (23505); the statement's position says which condition it
// was, so no server-side function is needed. The server skips the rest of
// the pipeline after an error, and nothing is written.
//
// How each condition holds from its check to the commit, at READ
// COMMITTED:
//   - Present: SELECT ... FOR KEY SHARE (FOR UPDATE when the batch writes
//     the key): nobody deletes the row before the commit.
//   - Equals: FOR SHARE (FOR UPDATE when written): nobody changes it. A
//     row being changed is waited for and re-read at its newest version.
//   - Absent: a placeholder row (v NULL) inserted under the primary key;
//     another transaction inserting the key waits for this one, and the
//     placeholder is deleted before the commit, so nobody else ever sees
//     it. When the first write that touches the key is a Set of it, the
//     Set itself is a plain INSERT and no placeholder is needed (a
//     versioned Put).
//   - RangeEmpty: there is no row to lock. See guard.
//
// Deadlocks (40P01) and serialization failures (40001) are
// ErrConditionFailed: nothing was written and the caller may retry.
type plan struct {
	stmts []stmt
}

type stmtKind uint8

const (
	kOther  stmtKind = iota
	kCond            // a failed condition: 22012 or 23505
	kCommit          // COMMIT
)

type stmt struct {
	sql  string
	args []any
	kind stmtKind
	what string   // the condition, for messages
	keys [][]byte // the conditions' keys (kCond)
}

func (p *plan) add(kind stmtKind, what, sql string, args ...any) {
	p.stmts = append(p.stmts, stmt{sql: sql, args: args, kind: kind, what: what})
}

// addCond adds the check of the conditions on keys.
func (p *plan) addCond(keys [][]byte, what, sql string, args ...any) {
	p.stmts = append(p.stmts, stmt{sql: sql, args: args, kind: kCond, what: what, keys: keys})
}

// guard is how a batch with a RangeEmpty condition keeps the range empty
// until it commits, per dialect and isolation:
//
//   - PostgreSQL, READ COMMITTED (the default): a transaction-scoped
//     advisory lock on the range's key prefix (codec.Split), exclusive;
//     every batch that Sets a key of a numbered family takes the lock of
//     the key's prefix shared, in the same statement as any other advisory
//     lock of the batch, sorted, before anything else. Once the exclusive
//     lock is granted every writer under the prefix has committed or is
//     waiting, and the check's statement sees the newest rows. Writers
//     under one prefix never wait for each other. A batch that also locks
//     a row under the prefix (Present or Equals) skips the shared lock: a
//     range with that row in it is not empty, and the row cannot go
//     before the batch commits.
//   - A range wider than one prefix (or of an unnumbered family), and any
//     RangeEmpty at REPEATABLE READ on PostgreSQL: LOCK TABLE ... IN SHARE
//     ROW EXCLUSIVE MODE first, which waits for every writer and holds new
//     ones until the commit. It is taken before the transaction's
//     snapshot, so the check sees every earlier commit. tipkv's packages
//     never send such a range.
//   - SERIALIZABLE: nothing more; the engine detects the conflict.
//   - YugabyteDB and CockroachDB at a weaker level: the batch runs
//     SERIALIZABLE. Their serializable reads take read locks (intents)
//     that every writer's writes conflict with, whatever its level
//     (PostgreSQL's serializable does not see writers below it, which is
//     why it is not used there for this).
type guard uint8

const (
	guardNone guard = iota
	guardPrefix
	guardTable
	guardSerializable
)

// rangePrefix returns the one prefix that every key in [lo, hi) has, when
// there is one: lo is a complete prefix of a numbered family (its family
// byte and all its segments) or extends one, and hi is at most the end of
// that prefix. codec.Split of every key in the range is then that prefix.
func rangePrefix(lo, hi []byte) ([]byte, bool) {
	if len(lo) == 0 {
		return nil, false
	}
	var nseg int
	switch codec.Family(lo[0]) {
	case codec.FamilyVersions:
		nseg = 2
	case codec.FamilyQueueItems, codec.FamilyFeed, codec.FamilyDeadLetters:
		nseg = 1
	default:
		return nil, false
	}
	rest := lo[1:]
	for range nseg {
		var err error
		if rest, err = codec.SkipSegment(rest); err != nil {
			return nil, false
		}
	}
	p := lo[:len(lo)-len(rest)]
	end := codec.PrefixEnd(p)
	if end == nil || bytes.Compare(hi, end) > 0 {
		return nil, false
	}
	return p, true
}

// keyPrefix is the prefix whose lock a Set of k takes shared, if any.
func keyPrefix(k []byte) ([]byte, bool) {
	if len(k) == 0 {
		return nil, false
	}
	switch codec.Family(k[0]) {
	case codec.FamilyVersions, codec.FamilyQueueItems, codec.FamilyFeed, codec.FamilyDeadLetters:
		return k[:codec.Split(k)], true
	}
	return nil, false
}

// giveWay adds, for a batch whose writer said which writer locks it holds
// (held non-nil, engine.LockHolding), the statement that fails the
// conditions under a prefix whose lock someone else holds or waits for: a
// transaction-scoped shared try-lock on each such prefix's writer lock id
// (lock.go), 22012 when one is not granted. An exclusive holder or an
// exclusive waiter refuses it, so a writer that has not collided yet asks
// for the lock (the failure names its keys) and queues behind the holder
// instead of overtaking it. A granted shared lock is held to the commit:
// a writer asking for the exclusive lock meanwhile waits for this commit,
// and then reads what it wrote. It costs no round trip, and nothing when
// the batch has no conditions outside the prefixes it holds.
func (s *Store) giveWay(p *plan, conds []engine.Cond, held [][]byte) {
	if held == nil || s.cfg.Dialect != Postgres {
		return
	}
	var keys [][]byte
	var as, bs []int32
	seen := map[[2]int32]bool{}
	for _, c := range conds {
		if len(c.Key) == 0 {
			continue
		}
		pre := engine.LockPrefix(c.Key)
		if slices.ContainsFunc(held, func(h []byte) bool { return bytes.Equal(h, pre) }) {
			continue
		}
		keys = append(keys, c.Key)
		if id := s.writerLockID(pre); !seen[id] {
			seen[id] = true
			as, bs = append(as, id[0]), append(bs, id[1])
		}
	}
	if len(keys) > 0 {
		p.addCond(keys, "another writer holds or waits for the lock of a key the batch requires", s.q.giveWay, as, bs)
	}
}

func (s *Store) plan(ops []op, conds []engine.Cond, held [][]byte) *plan {
	p := &plan{}
	iso := s.cfg.Isolation
	g := guardNone
	var exclusive [][]byte
	for _, c := range conds {
		if c.Kind != engine.RangeEmpty {
			continue
		}
		switch {
		case iso == Serializable:
		case s.cfg.Dialect != Postgres:
			g = guardSerializable
		case iso == RepeatableRead:
			g = max(g, guardTable)
		default:
			if pre, ok := rangePrefix(c.Key, c.End); ok {
				exclusive = append(exclusive, pre)
				g = max(g, guardPrefix)
			} else {
				g = max(g, guardTable)
			}
		}
	}
	level := map[Isolation]string{ReadCommitted: "READ COMMITTED", Serializable: "SERIALIZABLE", RepeatableRead: "REPEATABLE READ"}[iso]
	if g == guardSerializable {
		level = "SERIALIZABLE"
	}
	p.add(kOther, "", "BEGIN ISOLATION LEVEL "+level)
	s.giveWay(p, conds, held)

	written := func(k []byte) bool {
		for _, o := range ops {
			if o.kind == opDeleteRange {
				if bytes.Compare(o.k, k) <= 0 && bytes.Compare(k, o.end) < 0 {
					return true
				}
			} else if bytes.Equal(o.k, k) {
				return true
			}
		}
		return false
	}

	// Locks first, before any snapshot is taken.
	if g == guardTable {
		p.add(kOther, "", s.q.lockTable)
	} else if s.cfg.Dialect == Postgres && iso == ReadCommitted {
		locked := map[string]bool{} // prefixes with a row locked by a condition
		for _, c := range conds {
			if c.Kind == engine.KeyPresent || c.Kind == engine.KeyEquals {
				if pre, ok := keyPrefix(c.Key); ok {
					locked[string(pre)] = true
				}
			}
		}
		mode := map[int64]bool{}
		for _, pre := range exclusive {
			mode[s.lockID(pre)] = true
		}
		for _, o := range ops {
			if o.kind != opSet {
				continue
			}
			if pre, ok := keyPrefix(o.k); ok && !locked[string(pre)] {
				if id := s.lockID(pre); !mode[id] {
					mode[id] = false
				}
			}
		}
		if len(mode) > 0 {
			ids := make([]int64, 0, len(mode))
			for id := range mode {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			excl := make([]bool, len(ids))
			for i, id := range ids {
				excl[i] = mode[id]
			}
			p.add(kOther, "", s.q.advisory, ids, excl)
		}
	}

	var los, his [][]byte
	for _, c := range conds {
		if c.Kind == engine.RangeEmpty {
			los, his = append(los, c.Key), append(his, c.End)
		}
	}
	switch len(los) {
	case 0:
	case 1:
		p.addCond(los, fmt.Sprintf("range [%x, %x) is not empty", los[0], his[0]), s.q.rangeEmpty, los[0], his[0])
	default: // new documents in one Update: one statement, not one each
		p.addCond(los, "a range required empty is not empty", s.q.rangesEmpty, los, his)
	}
	points := make([]engine.Cond, 0, len(conds))
	for _, c := range conds {
		if c.Kind == engine.KeyPresent || c.Kind == engine.KeyEquals {
			points = append(points, c)
		}
	}
	sort.SliceStable(points, func(i, j int) bool { return bytes.Compare(points[i].Key, points[j].Key) < 0 })
	for _, c := range points {
		w := written(c.Key)
		if c.Kind == engine.KeyPresent {
			q := s.q.present
			if w {
				q = s.q.presentLock
			}
			p.addCond([][]byte{c.Key}, fmt.Sprintf("key %x is absent", c.Key), q, c.Key)
			continue
		}
		q := s.q.equals
		if w {
			q = s.q.equalsLock
		}
		p.addCond([][]byte{c.Key}, fmt.Sprintf("key %x does not hold the value read", c.Key), q, c.Key, c.Value)
	}

	// Absent: fold into the first write that touches the key when it is a
	// Set of it; otherwise a placeholder.
	inserts := map[int]bool{} // op index -> Set sent as a plain INSERT
	var holders [][]byte
	seen := map[string]bool{}
	for _, c := range conds {
		if c.Kind != engine.KeyAbsent || seen[string(c.Key)] {
			continue
		}
		seen[string(c.Key)] = true
		folded := false
		for i, o := range ops {
			touches := bytes.Equal(o.k, c.Key) || (o.kind == opDeleteRange && bytes.Compare(o.k, c.Key) <= 0 && bytes.Compare(c.Key, o.end) < 0)
			if touches {
				if o.kind == opSet && bytes.Equal(o.k, c.Key) {
					inserts[i], folded = true, true
				}
				break
			}
		}
		if !folded {
			holders = append(holders, c.Key)
		}
	}
	slices.SortFunc(holders, bytes.Compare)
	switch len(holders) {
	case 0:
	case 1:
		p.addCond(holders[:1], fmt.Sprintf("key %x is present", holders[0]), s.q.absent, holders[0])
	default:
		p.addCond(holders, "a key required absent is present", s.q.absentMany, holders)
	}

	s.planWrites(p, ops, inserts)

	if len(holders) > 0 {
		p.add(kOther, "", s.q.cleanup, holders)
	}
	if s.cfg.Dialect == Postgres {
		if payload := s.payload(ops); payload != "" {
			p.add(kOther, "", s.q.notify, s.channel, payload)
		}
	}
	p.add(kCommit, "", "COMMIT")
	return p
}

// planWrites adds the writes in order. A run of Sets becomes one upsert of
// its distinct keys (the last value of each wins, as it would in order),
// a run of Deletes one DELETE; a Set that checks an Absent condition is
// sent alone as a plain INSERT.
func (s *Store) planWrites(p *plan, ops []op, inserts map[int]bool) {
	for i := 0; i < len(ops); {
		o := ops[i]
		switch {
		case o.kind == opSet && inserts[i]:
			p.addCond([][]byte{o.k}, fmt.Sprintf("key %x is present", o.k), s.q.insert, o.k, o.v)
			i++
		case o.kind == opSet:
			j := i
			for j < len(ops) && ops[j].kind == opSet && !inserts[j] {
				j++
			}
			if j-i == 1 {
				p.add(kOther, "", s.q.set, o.k, o.v)
			} else {
				last := map[string][]byte{}
				for _, r := range ops[i:j] {
					last[string(r.k)] = r.v
				}
				ks := make([][]byte, 0, len(last))
				for k := range last {
					ks = append(ks, []byte(k))
				}
				slices.SortFunc(ks, bytes.Compare) // lock rows in key order
				vs := make([][]byte, len(ks))
				for n, k := range ks {
					vs[n] = last[string(k)]
				}
				p.add(kOther, "", s.q.setMany, ks, vs)
			}
			i = j
		case o.kind == opDelete:
			j := i
			for j < len(ops) && ops[j].kind == opDelete {
				j++
			}
			if j-i == 1 {
				p.add(kOther, "", s.q.del, o.k)
			} else {
				ks := make([][]byte, 0, j-i)
				for _, r := range ops[i:j] {
					ks = append(ks, r.k)
				}
				p.add(kOther, "", s.q.delMany, ks)
			}
			i = j
		default:
			if bytes.Compare(o.k, o.end) < 0 {
				p.add(kOther, "", s.q.delRange, o.k, o.end)
			}
			i++
		}
	}
}

// listBudget is the most bytes a notification spends naming keys and
// ranges one by one. A batch whose notified writes would take more (an
// outbox Update of 500 documents, a feed append of many events) names,
// for each family, one range covering its writes there, and if even that
// is too long (very long keys), only the families: "something changed in
// family F", a wake-up for every watch of F. So a notification is at most
// a few KiB whatever the batch, and one pg_notify per commit: PostgreSQL
// copies every payload into its notification queue and each listening
// process reads it.
const listBudget = 1024

// payload is the notification of a batch: the writes in notified
// families, comma-separated: "k<hex>" for a key, "r<hex>-<hex>" for a
// range [lo, hi) (a deleted range, or a family's writes collapsed), or
// "f<hex>" for a whole family (see listBudget). Empty: nothing to notify.
// A listener that meets an entry it does not know wakes every watch.
func (s *Store) payload(ops []op) string {
	type fam struct {
		entries []string
		lo, hi  []byte // covering every write of the batch in the family
	}
	var fams [256]*fam
	var order []byte // families in order of first write
	seen := map[string]bool{}
	size := 0
	note := func(f byte, e string, lo, hi []byte) {
		fm := fams[f]
		if fm == nil {
			fm = &fam{lo: lo, hi: hi}
			fams[f] = fm
			order = append(order, f)
		}
		if bytes.Compare(lo, fm.lo) < 0 {
			fm.lo = lo
		}
		if bytes.Compare(hi, fm.hi) > 0 {
			fm.hi = hi
		}
		if seen[e] || size > listBudget {
			return // past the budget, only the bounds matter
		}
		seen[e] = true
		fm.entries = append(fm.entries, e)
		size += len(e) + 1
	}
	for _, o := range ops {
		switch {
		case o.kind == opDeleteRange:
			if !s.notifiedRange(o.k, o.end) {
				continue
			}
			var f byte
			if len(o.k) > 0 {
				f = o.k[0]
			}
			note(f, "r"+hex.EncodeToString(o.k)+"-"+hex.EncodeToString(o.end), o.k, o.end)
		case len(o.k) > 0 && s.notify[o.k[0]]:
			note(o.k[0], "k"+hex.EncodeToString(o.k), o.k, append(o.k[:len(o.k):len(o.k)], 0))
		}
	}
	var out []string
	switch {
	case len(order) == 0:
		return ""
	case size <= listBudget:
		for _, f := range order {
			out = append(out, fams[f].entries...)
		}
	default:
		n := 0
		for _, f := range order {
			fm := fams[f]
			e := "r" + hex.EncodeToString(fm.lo) + "-" + hex.EncodeToString(fm.hi)
			out = append(out, e)
			n += len(e) + 1
		}
		if n > listBudget {
			out = out[:0]
			for _, f := range order {
				out = append(out, "f"+hex.EncodeToString([]byte{f}))
			}
		}
	}
	return strings.Join(out, ",")
}

// notifiedRange reports whether [lo, hi) may hold a key of a notified
// family.
func (s *Store) notifiedRange(lo, hi []byte) bool {
	for f := range s.notify {
		if !s.notify[f] {
			continue
		}
		flo, fhi := []byte{byte(f)}, []byte{byte(f) + 1}
		if f == 0xff {
			fhi = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}
		if bytes.Compare(lo, fhi) < 0 && bytes.Compare(hi, flo) > 0 {
			return true
		}
	}
	return false
}

// apply sends the plan as one pipeline and maps its outcome to the
// contract's errors:
//
//   - all results read, COMMIT's included: applied.
//   - a condition's statement failed (22012, 23505): ErrConditionFailed,
//     as an *engine.ConditionError naming the conditions' keys.
//   - 40001 (serialization failure), 40P01 (deadlock): ErrConditionFailed.
//   - 40003 (CockroachDB: statement completion unknown): ErrUnknownOutcome.
//   - any other error the server reports for a statement before COMMIT,
//     FATAL ones included (a backend terminated while the batch waited on
//     a lock): not applied, since the server reports errors in order and
//     stopped at that statement.
//   - COMMIT failing with severity ERROR: not applied (rolled back).
//     FATAL or PANIC on COMMIT (the backend terminated while the commit
//     waited for a synchronous standby, after it was written locally):
//     ErrUnknownOutcome.
//   - a broken connection or any other error of the client after the
//     pipeline may have left: ErrUnknownOutcome. Before it left
//     (pgconn.SafeToRetry, or statements that could not be prepared):
//     not applied.
func (s *Store) apply(p *plan) error {
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("sqlkv: apply: acquire a connection: %w", err)
	}
	pb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(p.stmts))}
	for _, st := range p.stmts {
		pb.Queue(st.sql, st.args...)
	}
	br := conn.SendBatch(ctx, pb)
	failed, ferr := -1, error(nil)
	for i := range p.stmts {
		if _, err := br.Exec(); err != nil {
			failed, ferr = i, err
			break
		}
	}
	_ = br.Close() // after COMMIT's result, nothing can undo the commit
	if failed < 0 {
		conn.Release()
		return nil
	}
	err = classify(p.stmts[failed], ferr)
	if !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			conn.Conn().Close(ctx)
		}
	}
	conn.Release()
	return err
}

func classify(st stmt, err error) error {
	var pre pgx.ErrPreprocessingBatch
	if errors.As(err, &pre) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("sqlkv: apply (not sent): %w", err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%w: sqlkv: the connection failed after the batch was sent: %v", engine.ErrUnknownOutcome, err)
	}
	switch {
	case pe.Code == "40001" || pe.Code == "40P01":
		return fmt.Errorf("%w: sqlkv: %s (SQLSTATE %s)", engine.ErrConditionFailed, pe.Message, pe.Code)
	case pe.Code == "40003":
		return fmt.Errorf("%w: sqlkv: %s (SQLSTATE %s)", engine.ErrUnknownOutcome, pe.Message, pe.Code)
	case st.kind == kCommit && pe.Severity != "ERROR":
		return fmt.Errorf("%w: sqlkv: COMMIT failed with %s %s: %s", engine.ErrUnknownOutcome, pe.Severity, pe.Code, pe.Message)
	case st.kind == kCond && (pe.Code == "22012" || pe.Code == "23505"):
		return &engine.ConditionError{Keys: st.keys, Msg: st.what}
	}
	return fmt.Errorf("sqlkv: apply (not applied): %w", err)
}
