package etcdkv

import "errors"

// ErrCompacted is returned by a read pinned to a revision (a paged
// iterator, a snapshot, a watch resumed after a disconnection) when the
// cluster has compacted that revision away. Nothing is wrong with the
// store: read again, at the current revision.
var ErrCompacted = errors.New("tipkv: etcd: the revision read was compacted; read again")
