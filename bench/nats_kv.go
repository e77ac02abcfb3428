package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsKV is a NATS JetStream key-value bucket with file storage, on a
// nats-server run in this process with JetStream on, its store in dir and
// no listener: nats.go connects to it in-process. The bucket keeps
// kvHistory versions per key, JetStream's most. revs holds each key's
// revisions (stream sequences) in version order, for GetRevision and the
// checks.
type natsKV struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	kv   jetstream.KeyValue
	ctx  context.Context
	revs map[string][]uint64
	sink []byte
}

const natsBucket = "docs"

func openNATSKV(dir string, cfg config) (*natsKV, error) {
	srv, err := server.NewServer(&server.Options{
		JetStream: true, StoreDir: dir, DontListen: true, NoSigs: true, NoLog: true,
	})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(time.Minute) {
		srv.Shutdown()
		return nil, errors.New("nats-server: not ready within a minute")
	}
	n := &natsKV{srv: srv, ctx: context.Background(), revs: map[string][]uint64{}}
	fail := func(err error) (*natsKV, error) {
		_ = n.close()
		return nil, err
	}
	if n.nc, err = nats.Connect("", nats.InProcessServer(srv)); err != nil {
		return fail(err)
	}
	if n.js, err = jetstream.New(n.nc, jetstream.WithPublishAsyncMaxPending(cfg.LoadBatch)); err != nil {
		return fail(err)
	}
	n.kv, err = n.js.CreateKeyValue(n.ctx, jetstream.KeyValueConfig{
		Bucket: natsBucket, History: kvHistory, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return fail(err)
	}
	return n, nil
}

// load publishes the records asynchronously to their keys' subjects (what
// kv.Put publishes to), then waits for every ack.
func (n *natsKV) load(recs []record) error {
	futures := make([]jetstream.PubAckFuture, len(recs))
	for i, r := range recs {
		f, err := n.js.PublishAsync("$KV."+natsBucket+"."+r.id, r.value)
		if err != nil {
			return err
		}
		futures[i] = f
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			r := recs[i]
			n.revs[r.id] = append(n.revs[r.id], ack.Sequence)
			if int64(len(n.revs[r.id])) != r.version {
				return fmt.Errorf("load %s: %d revisions at version %d", r.id, len(n.revs[r.id]), r.version)
			}
		case err := <-f.Err():
			return err
		case <-time.After(time.Minute):
			return errors.New("nats: no ack within a minute")
		}
	}
	return nil
}

func (n *natsKV) latest(id string, want int64) error {
	e, err := n.kv.Get(n.ctx, id)
	if err != nil {
		return err
	}
	n.sink = e.Value()
	revs := n.revs[id]
	return check(nil, int64(len(revs)) == want && e.Revision() == revs[want-1] && len(n.sink) > 0,
		"latest of %s: revision %d, want version %d", id, e.Revision(), want)
}

func (n *natsKV) revision(id string, v int64) error {
	rev := n.revs[id][v-1]
	e, err := n.kv.GetRevision(n.ctx, id, rev)
	if err != nil {
		return err
	}
	n.sink = e.Value()
	return check(nil, e.Revision() == rev && len(n.sink) > 0, "revision %d of %s: got %d", rev, id, e.Revision())
}

func (n *natsKV) history(id string, count int64) error {
	es, err := n.kv.History(n.ctx, id)
	if err != nil {
		return err
	}
	for _, e := range es {
		n.sink = e.Value()
	}
	revs := n.revs[id]
	return check(nil, int64(len(es)) == count && es[len(es)-1].Revision() == revs[len(revs)-1],
		"history of %s: %d versions, want %d", id, len(es), count)
}

func (n *natsKV) put(id string, value []byte) (uint64, error) {
	rev, err := n.kv.Put(n.ctx, id, value)
	if err == nil {
		n.revs[id] = append(n.revs[id], rev)
	}
	return rev, err
}

// watch follows id with kv.Watch, updates only.
func (n *natsKV) watch(ctx context.Context, id string) (<-chan uint64, error) {
	w, err := n.kv.Watch(ctx, id, jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	ch := make(chan uint64, 1024)
	go func() {
		defer close(ch)
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // nil: the initial values are done (none with UpdatesOnly)
			}
			select {
			case ch <- e.Revision():
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (n *natsKV) close() error {
	if n.nc != nil {
		n.nc.Close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	return nil
}
