package etcdtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// MemberEnv is the environment variable that tells a process started by a
// ProcCluster which member to run. A test binary's TestMain calls
// ServeMember first thing; it returns false in every other process.
const MemberEnv = "ETCDTEST_MEMBER"

// memberSpec is what a member process is told (as JSON in MemberEnv).
type memberSpec struct {
	Name, Dir, Peer, Client, Initial string
	Existing                         bool
}

// ServeMember runs the etcd member that MemberEnv describes, if it is set:
// it starts the member, writes "ready" on standard output when the member
// has joined its cluster, and serves until the process is killed. It
// exits the process. Without MemberEnv it returns false at once.
func ServeMember() bool {
	raw := os.Getenv(MemberEnv)
	if raw == "" {
		return false
	}
	var spec memberSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest: member spec:", err)
		os.Exit(2)
	}
	peer, err1 := url.Parse(spec.Peer)
	cli, err2 := url.Parse(spec.Client)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest: member spec:", err)
		os.Exit(2)
	}
	c := &Cluster{opts: Options{Logger: zap.NewNop()}}
	m := &member{name: spec.Name, dir: spec.Dir, peer: *peer, cli: *cli, started: spec.Existing}
	e, err := embed.StartEtcd(c.config(m, spec.Initial))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest: start member:", err)
		os.Exit(1)
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcdtest: member:", err)
		os.Exit(1)
	}
	err = <-e.Err()
	fmt.Fprintln(os.Stderr, "etcdtest: member:", err)
	os.Exit(1)
	return true
}

// ProcCluster is an etcd cluster whose members are processes, so that a
// test can SIGKILL one: each is the program Command returns (a test binary
// run again, whose TestMain calls ServeMember), told by MemberEnv which
// member it is. Its methods are not safe for concurrent use.
type ProcCluster struct {
	dir     string
	command func() *exec.Cmd
	members []*procMember
}

type procMember struct {
	spec memberSpec
	cmd  *exec.Cmd // nil while killed
}

// StartProcs starts a cluster of n member processes and waits until each
// is ready. command returns the command to run for a member (typically
// exec.Command(os.Args[0], "-test.run=^$")); StartProcs adds MemberEnv to
// its environment.
func StartProcs(n int, command func() *exec.Cmd) (*ProcCluster, error) {
	dir, err := os.MkdirTemp("", "etcdtest-procs-")
	if err != nil {
		return nil, err
	}
	c := &ProcCluster{dir: dir, command: command}
	var initial []string
	for i := range n {
		spec := memberSpec{Name: fmt.Sprintf("m%d", i), Dir: filepath.Join(dir, fmt.Sprintf("m%d", i))}
		peer, err1 := freeURL()
		cli, err2 := freeURL()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		spec.Peer, spec.Client = peer.String(), cli.String()
		c.members = append(c.members, &procMember{spec: spec})
		initial = append(initial, spec.Name+"="+spec.Peer)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range c.members {
		m.spec.Initial = strings.Join(initial, ",")
		wg.Go(func() { errs[i] = c.start(m) }) // members wait for each other's peers
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// start starts m's process and waits for its "ready".
func (c *ProcCluster) start(m *procMember) error {
	spec, err := json.Marshal(m.spec)
	if err != nil {
		return err
	}
	cmd := c.command()
	cmd.Env = append(os.Environ(), MemberEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(m.spec.Dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	_ = logf.Close() // the child has its own descriptor
	m.cmd = cmd
	m.spec.Existing = true // from now on a restart joins the cluster
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			log, _ := os.ReadFile(m.spec.Dir + ".log")
			return fmt.Errorf("etcdtest: member %s exited before it was ready: %s", m.spec.Name, log)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("etcdtest: member %s not ready after a minute", m.spec.Name)
	}
}

// Endpoints returns the client URLs of every member, running or not.
func (c *ProcCluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.spec.Client)
	}
	return out
}

// Kill SIGKILLs member i and waits for its process to end.
func (c *ProcCluster) Kill(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	_ = m.cmd.Wait()
	m.cmd = nil
}

// Restart starts member i again on its data and ports and waits until it
// is ready (it needs a quorum for that).
func (c *ProcCluster) Restart(i int) error {
	m := c.members[i]
	if m.cmd != nil {
		return errors.New("etcdtest: restart of a running member")
	}
	return c.start(m)
}

// Leader returns the index of the member that the running members agree
// is the leader, waiting up to timeout for them to have one.
func (c *ProcCluster) Leader(timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var alive []string
	for _, m := range c.members {
		if m.cmd != nil {
			alive = append(alive, m.spec.Client)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: alive, DialTimeout: timeout, Logger: zap.NewNop()})
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	for {
		for _, ep := range alive {
			st, err := cli.Status(ctx, ep)
			if err != nil || st.Leader == 0 {
				continue
			}
			if st.Leader == st.Header.MemberId {
				for i, m := range c.members {
					if m.spec.Client == ep {
						return i, nil
					}
				}
			}
		}
		// No member says it leads yet: an election is under way. Ask
		// again when it may have ended (an election timeout is 1 s).
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader after %v", timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close kills every member and removes their data.
func (c *ProcCluster) Close() {
	for i := range c.members {
		c.Kill(i)
	}
	_ = os.RemoveAll(c.dir)
}
