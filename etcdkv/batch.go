package etcdkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/tipkv/tipkv/engine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// batch is an engine.Batch sent as one etcd txn: its conditions are the
// txn's compares, its writes (normalised, see normalize) the txn's success
// ops, and the txn has no failure ops. etcd applies a txn atomically at one
// revision, so the writes of a batch become visible together, to every
// client, when Apply returns; and they are durable then (a quorum of
// members has synced them), so Wait has nothing to wait for.
type batch struct {
	s     *Store
	ops   []op
	conds []engine.Cond
	size  int   // bytes of keys, values and conditions as added
	err   error // the batch is refused: a malformed condition, a write over the limits

	holding bool     // Hold was called: check the locks of the conditions' prefixes
	held    [][]byte // the prefixes whose locks the writer holds, sorted
}

var _ engine.LockHolding = (*batch)(nil)

// NewBatch implements engine.Store.
func (s *Store) NewBatch() engine.Batch { return &batch{s: s} }

func (b *batch) add(o op) error {
	if b.err != nil {
		return b.err
	}
	n := len(o.key) + len(o.end) + len(o.value)
	switch {
	case len(o.key) == 0:
		b.err = fmt.Errorf("%w: etcdkv: a write to an empty key", engine.ErrInvalid)
	case n > b.s.caps.MaxBatchBytes:
		b.err = fmt.Errorf("%w: etcdkv: a write of %d bytes is over the batch limit of %d bytes", engine.ErrInvalid, n, b.s.caps.MaxBatchBytes)
	}
	if b.err != nil {
		return b.err
	}
	b.ops = append(b.ops, o)
	b.size += n
	return nil
}

// Set implements engine.Batch. The batch keeps copies of key and value:
// the contract would let it keep the slices themselves, but queue's
// Enqueue reuses one key buffer for all its items and returns its value
// buffer to a pool before an Update commits, and versioned pools its Put
// buffers the same way, so a batch that kept them would send every item
// under the last key.
func (b *batch) Set(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return b.add(op{kind: opSet, key: bytes.Clone(key), value: bytes.Clone(value)})
}

// Delete implements engine.Batch.
func (b *batch) Delete(key []byte) error {
	return b.add(op{kind: opDelete, key: bytes.Clone(key)})
}

// DeleteRange implements engine.Batch.
func (b *batch) DeleteRange(lo, hi []byte) error {
	return b.add(op{kind: opDeleteRange, key: bytes.Clone(lo), end: bytes.Clone(hi)})
}

// Require implements engine.Batch. Each condition becomes one compare:
//
//	Absent(k)          create_revision(k) = 0
//	Present(k)         create_revision(k) > 0
//	Equals(k, v)       value(k) = v (false on a missing key)
//	Empty(lo, hi)      create_revision = 0 over [lo, hi)
//
// A compare over a range holds when it holds for every key in it, and on an
// empty range compares the zero key-value, whose create_revision is 0: so
// Empty holds exactly when no key is stored in [lo, hi). The server reads
// the whole range to decide (its values too): keep the range tight.
func (b *batch) Require(c engine.Cond) error {
	if err := c.Check(); err != nil {
		if b.err == nil {
			b.err = err // the batch is refused as a whole
		}
		return err
	}
	if b.err != nil {
		return b.err
	}
	c.Key, c.End, c.Value = bytes.Clone(c.Key), bytes.Clone(c.End), bytes.Clone(c.Value)
	b.conds = append(b.conds, c)
	b.size += c.Size()
	return nil
}

// Hold implements engine.LockHolding: Apply adds, for each prefix of a
// condition's key (engine.LockPrefix) that is not among prefixes, a
// compare that the prefix's lock directory (lock.go) holds no key, so
// that the txn fails while another caller of Lock holds or waits for that
// lock. Such a failure is an *engine.ConditionError naming the
// condition's key, as a failed condition is. The locks of prefixes
// themselves are not checked: a holder whose lease expired unseen
// commits on its conditions alone, as any writer without the lock does
// (the locks are advisory). A lock check is one more compare, so it
// counts against MaxTxnOps and the request's size: where the batch's own
// conditions leave no room for them all, Apply checks the locks it has
// room for and lets the rest be.
func (b *batch) Hold(prefixes [][]byte) {
	b.holding = true
	b.held = b.held[:0]
	for _, p := range prefixes {
		b.held = append(b.held, bytes.Clone(p))
	}
	slices.SortFunc(b.held, bytes.Compare)
}

func (b *batch) holds(p []byte) bool {
	_, ok := slices.BinarySearchFunc(b.held, p, bytes.Compare)
	return ok
}

func (b *batch) Empty() bool { return len(b.ops) == 0 }
func (b *batch) Len() int    { return len(b.ops) }
func (b *batch) Size() int   { return b.size }

// txn is a batch ready to send.
type txn struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
	// keys[i] is the key of the condition that cmps[i] checks: the
	// batch's conditions, then a lock check (Hold) per prefix, which
	// names the first condition on that prefix.
	keys [][]byte
	// nconds is how many of cmps are the batch's conditions; the rest
	// are lock checks.
	nconds int
	// probe says that the txn's failure ops are one txn per compare, of
	// that compare alone: a failed txn's responses then say which
	// compares failed.
	probe bool
}

// build normalises the batch and checks it against the limits, before
// anything is sent: the normalised writes and, separately, the conditions
// each at most MaxTxnOps; their keys, values and ends at most MaxBatchBytes.
func (b *batch) build() (txn, error) {
	norm := normalize(b.ops)
	caps := b.s.caps
	if len(norm) > caps.MaxBatchOps {
		return txn{}, fmt.Errorf("%w: etcdkv: the batch holds %d writes once normalised (%d as written; a Set inside a range the batch deletes splits the range in two); a txn takes at most %d (the server's --max-txn-ops): split the Update", engine.ErrInvalid, len(norm), len(b.ops), caps.MaxBatchOps)
	}
	if len(b.conds) > caps.MaxBatchOps {
		return txn{}, fmt.Errorf("%w: etcdkv: the batch holds %d conditions; a txn takes at most %d (the server's --max-txn-ops)", engine.ErrInvalid, len(b.conds), caps.MaxBatchOps)
	}
	size := 0
	for _, o := range norm {
		size += len(o.key) + len(o.end) + len(o.value)
	}
	for _, c := range b.conds {
		size += c.Size()
	}
	if size > caps.MaxBatchBytes {
		return txn{}, fmt.Errorf("%w: etcdkv: the batch holds %d bytes of keys, values and conditions; a txn takes at most %d (the server's --max-request-bytes less framing): split the Update", engine.ErrInvalid, size, caps.MaxBatchBytes)
	}
	t := txn{cmps: make([]clientv3.Cmp, 0, len(b.conds)), ops: make([]clientv3.Op, 0, len(norm)), keys: make([][]byte, 0, len(b.conds))}
	s := b.s
	for _, c := range b.conds {
		k := s.key(c.Key)
		switch c.Kind {
		case engine.KeyAbsent:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		case engine.KeyPresent:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), ">", 0))
		case engine.KeyEquals:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.Value(k), "=", string(c.Value)))
		case engine.RangeEmpty:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0).WithRange(s.key(c.End)))
		}
		t.keys = append(t.keys, c.Key)
	}
	t.nconds = len(t.cmps)
	room := caps.MaxBatchBytes - size
	probeBytes := 0
	for _, c := range b.conds {
		probeBytes += c.Size() + 2*len(s.ns) + 2*opOverhead
	}
	if b.holding {
		// A lock check per prefix not held, while there is room: each
		// costs its directory's key and range end, and framing.
		var checked [][]byte
		for _, c := range b.conds {
			p := engine.LockPrefix(c.Key)
			if b.holds(p) || slices.ContainsFunc(checked, func(q []byte) bool { return bytes.Equal(p, q) }) {
				continue
			}
			n := 2 * (len(s.ns) + len(lockRoot) + 2*len(p) + 1)
			if len(t.cmps) >= caps.MaxBatchOps || n+opOverhead > room {
				break
			}
			checked = append(checked, p)
			t.cmps = append(t.cmps, s.lockCmp(p))
			t.keys = append(t.keys, c.Key)
			room -= n + opOverhead
			probeBytes += n + 2*opOverhead
		}
	}
	// Which compares failed, when there is room: one more txn per compare
	// in the failure branch, which etcd evaluates only when the txn fails
	// (so a commit that succeeds costs nothing more on the server), and
	// counts in the request's size and as ops: a nested txn of one compare
	// needs one op to spare under --max-txn-ops. A txn without writes gets
	// no probe: nested txns would make a read a Raft proposal.
	if len(norm) > 0 && len(t.cmps) > 0 && len(t.cmps) < caps.MaxBatchOps && len(norm) < caps.MaxBatchOps && probeBytes <= room {
		t.probe = true
	}
	// clientv3's Op constructors copy their key and value into []byte at
	// once, so they get views of one reused key buffer and of the batch's
	// values instead of strings made for them: a 1,000-Set batch spends
	// half as long here.
	var kb []byte
	nsKey := func(k []byte) string {
		kb = append(append(kb[:0], s.ns...), k...)
		return view(kb)
	}
	for _, o := range norm {
		switch o.kind {
		case opSet:
			t.ops = append(t.ops, clientv3.OpPut(nsKey(o.key), view(o.value)))
		case opDelete:
			t.ops = append(t.ops, clientv3.OpDelete(s.key(o.key)))
		case opDeleteRange:
			t.ops = append(t.ops, clientv3.OpDelete(s.key(o.key), clientv3.WithRange(s.key(o.end))))
		}
	}
	if len(t.ops) == 0 && len(t.cmps) > 0 {
		// A txn without writes is a read to etcd, and one whose ops are all
		// serializable reads (none at all counts) is answered by the member
		// the client is connected to from its own state, without the
		// ReadIndex round that makes a read linearizable: a follower that
		// has not yet applied another client's acknowledged write would
		// say that the batch's conditions hold when they do not (a guard
		// of a Delete that writes nothing would pass). One linearizable
		// read, of no more than one key's count, makes the member catch up
		// with the leader before it compares.
		t.ops = append(t.ops, clientv3.OpGet(s.key(b.conds[0].Key), clientv3.WithCountOnly()))
	}
	return t, nil
}

// view returns b's bytes as a string without copying them, for an argument
// that the callee copies before it returns (clientv3.OpPut). The string
// must not outlive the call, nor b change during it.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Apply implements engine.Batch: one txn. Its result is one of:
//
//   - nil: the txn committed; its writes are visible and durable.
//   - ErrConditionFailed: a compare failed; nothing was written. The error
//     is an *engine.ConditionError naming the keys of the conditions that
//     failed (or of all of them when the txn had no room to find out:
//     see txn.failed).
//   - ErrInvalid: over the limits (checked before sending, or refused by
//     a server whose flags are lower than Config says); nothing written.
//   - ErrClosed: the store was closed before the txn was sent.
//   - ErrUnknownOutcome: the txn was sent and no answer came (timeout,
//     connection lost, leader lost mid-proposal, the store closed under
//     it). It may have committed. The store never resends it: see the
//     package doc for what to do.
//   - any other error: the server refused the txn before proposing it
//     (no leader, no space, too many requests, permission denied);
//     nothing was written.
func (b *batch) Apply(bool) error {
	if b.err != nil {
		return b.err
	}
	s := b.s
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	t, err := b.build()
	if err != nil {
		return err
	}
	if len(t.ops) == 0 && len(t.cmps) == 0 {
		return nil
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	var orElse []clientv3.Op
	if t.probe {
		orElse = make([]clientv3.Op, len(t.cmps))
		for i, c := range t.cmps {
			orElse[i] = clientv3.OpTxn([]clientv3.Cmp{c}, nil, nil)
		}
	}
	// A member that has lost its leader refuses the txn at once (a
	// definite failure) instead of holding it until a timeout.
	resp, err := s.c.Txn(clientv3.WithRequireLeader(ctx)).If(t.cmps...).Then(t.ops...).Else(orElse...).Commit()
	if err != nil {
		return s.commitErr(err)
	}
	if !resp.Succeeded {
		return t.failed(resp)
	}
	return nil
}

// failed is the error of a txn whose compares did not all hold: an
// *engine.ConditionError whose Keys are those of the conditions that
// failed, or whose prefix's lock another writer holds or waits for (Hold),
// when the txn had room for a probe (build); or else of every condition,
// as tipkv gave them (without the namespace). It matches
// engine.ErrConditionFailed.
func (t txn) failed(resp *clientv3.TxnResponse) error {
	rev := resp.Header.Revision
	if t.probe && len(resp.Responses) == len(t.cmps) {
		var keys [][]byte
		conds, locks := 0, 0
		for i, r := range resp.Responses {
			if tr := r.GetResponseTxn(); tr == nil || !tr.Succeeded {
				keys = appendKey(keys, t.keys[i])
				if i < t.nconds {
					conds++
				} else {
					locks++
				}
			}
		}
		var msg string
		switch {
		case locks == 0:
			msg = fmt.Sprintf("etcdkv: %d of the batch's %d conditions did not hold at revision %d", conds, t.nconds, rev)
		case conds == 0:
			msg = fmt.Sprintf("etcdkv: the batch has conditions on %d prefixes whose lock another writer holds or waits for, at revision %d", locks, rev)
		default:
			msg = fmt.Sprintf("etcdkv: %d of the batch's %d conditions did not hold, and it has conditions on %d prefixes whose lock another writer holds or waits for, at revision %d", conds, t.nconds, locks, rev)
		}
		if len(keys) > 0 {
			return &engine.ConditionError{Keys: keys, Msg: msg}
		}
	}
	var keys [][]byte
	for _, k := range t.keys {
		keys = appendKey(keys, k)
	}
	msg := fmt.Sprintf("etcdkv: one of the batch's %d conditions did not hold at revision %d", t.nconds, rev)
	if n := len(t.cmps) - t.nconds; n > 0 {
		msg = fmt.Sprintf("etcdkv: one of the batch's %d conditions did not hold, or another writer holds or waits for one of %d locks of their prefixes, at revision %d", t.nconds, n, rev)
	}
	return &engine.ConditionError{Keys: keys, Msg: msg}
}

// appendKey appends k to keys unless keys holds it already.
func appendKey(keys [][]byte, k []byte) [][]byte {
	for _, have := range keys {
		if bytes.Equal(have, k) {
			return keys
		}
	}
	return append(keys, k)
}

// Wait implements engine.Batch: an applied txn is already durable.
func (b *batch) Wait() error { return nil }

// Close implements engine.Batch.
func (b *batch) Close() error {
	b.ops, b.conds = nil, nil
	return nil
}

// commitErr sorts the error of a txn into a definite refusal (nothing was
// written) and an unknown outcome. Only errors the server gives before it
// proposes the txn to raft are definite; everything else, including every
// timeout and every broken connection, is unknown.
func (s *Store) commitErr(err error) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("%w: %w: etcdkv: the store was closed during a commit (%v)", engine.ErrUnknownOutcome, engine.ErrClosed, err)
	}
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrDuplicateKey):
		return fmt.Errorf("%w: etcdkv: the server refused the batch (are its --max-txn-ops or --max-request-bytes lower than Config says?): %w", engine.ErrInvalid, err)
	case definite(err):
		return fmt.Errorf("tipkv: etcd: commit refused, nothing written: %w", err)
	}
	return fmt.Errorf("%w: etcd: %w", engine.ErrUnknownOutcome, err)
}

// proposalDropped is raft.ErrProposalDropped's text: a member without a
// leader drops a proposal before it enters the log.
const proposalDropped = "raft proposal dropped"

// definite reports whether err is a refusal the server makes before it
// proposes a request.
func definite(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, rpctypes.ErrNoLeader), // with WithRequireLeader: the interceptor, before anything
		errors.Is(err, rpctypes.ErrNotCapable),
		errors.Is(err, rpctypes.ErrNoSpace),
		errors.Is(err, rpctypes.ErrTooManyRequests),
		errors.Is(err, rpctypes.ErrCorrupt):
		return true
	}
	var code codes.Code
	var desc string
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code, desc = ee.Code(), ee.Error()
	} else if st, ok := status.FromError(err); ok {
		code, desc = st.Code(), st.Message()
	} else {
		return false
	}
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted,
		codes.PermissionDenied, codes.Unauthenticated, codes.OutOfRange:
		return true
	}
	return desc == proposalDropped
}
