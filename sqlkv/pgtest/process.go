package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// process is a server that this package started: a cluster in a
// temporary directory, run by pg_ctl.
type process struct {
	bin      string // the PostgreSQL bin directory
	dir      string // the temporary directory: data, socket, log
	port     int
	cred     *syscall.Credential // the postgres user's, when run as root
	watchdog *exec.Cmd
}

// findPostgres returns the bin directory of the newest PostgreSQL
// installed, or "".
func findPostgres() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p)
	}
	return ""
}

// startProcess makes a cluster in a new temporary directory and starts it
// on a free loopback port. A watchdog stops the server and removes the
// directory when this process dies without Close.
func startProcess(bin string) (_ *process, err error) {
	p, err := newProcess(bin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(p.dir)
		}
	}()
	if err := p.run("initdb", "-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		return nil, err
	}
	if err := p.launch(); err != nil {
		return nil, err
	}
	return p, nil
}

// startStandby makes a streaming standby of primary in a new temporary
// directory, from a base backup, that connects as application name, and
// starts it on a free loopback port (launch).
func startStandby(primary *process, name string) (_ *process, err error) {
	p, err := newProcess(primary.bin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(p.dir)
		}
	}()
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.port, name)
	// -R writes standby.signal and primary_conninfo (conn): the copy
	// starts as a standby streaming from primary.
	if err := p.run("pg_basebackup", "-D", p.data(), "-d", conn, "-R", "-X", "stream", "--no-sync"); err != nil {
		return nil, err
	}
	if err := p.launch(); err != nil {
		return nil, err
	}
	return p, nil
}

// newProcess makes the temporary directory of a server, owned by the
// postgres user when the tests run as root.
func newProcess(bin string) (*process, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	p := &process{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root, and there is no postgres user to run the server as (the server refuses root): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	return p, nil
}

// launch starts the server on a free port and a watchdog that stops it
// and removes its directory if the test binary dies: it checks the parent
// once a second.
func (p *process) launch() (err error) {
	if p.port, err = freePort(); err != nil {
		return err
	}
	if err := p.start(); err != nil {
		return err
	}
	p.watchdog = exec.Command("sh", "-c", fmt.Sprintf("while [ -d /proc/%d ]; do sleep 1; done; %s -D %s -m immediate stop; rm -rf %s",
		os.Getpid(), filepath.Join(p.bin, "pg_ctl"), p.data(), p.dir))
	p.watchdog.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setsid: true}
	_ = p.watchdog.Start()
	return nil
}

func (p *process) data() string { return filepath.Join(p.dir, "data") }

// dsn is the server's connection string.
func (p *process) dsn() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// start starts the server and waits until it accepts connections. fsync
// is off: the tests are about semantics, not durability, and the machine
// is shared; the commit path (and a synchronous standby's wait) is
// otherwise the same.
func (p *process) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB -c autovacuum_naptime=1s", p.port, p.dir)
	return p.ctl("-o", opts, "-l", filepath.Join(p.dir, "log"), "-w", "-t", "120", "start")
}

// ctl runs pg_ctl on the cluster.
func (p *process) ctl(args ...string) error {
	return p.run("pg_ctl", append([]string{"-D", p.data()}, args...)...)
}

// run runs one of the server's programs, as the postgres user when the
// tests run as root.
func (p *process) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// close stops the server (if it runs), ends the watchdog and removes the
// directory.
func (p *process) close() error {
	var err error
	if _, serr := os.Stat(filepath.Join(p.data(), "postmaster.pid")); serr == nil {
		err = p.ctl("-m", "fast", "-w", "stop")
	}
	if p.watchdog != nil && p.watchdog.Process != nil {
		_ = p.watchdog.Process.Kill()
		_ = p.watchdog.Wait()
	}
	if rerr := os.RemoveAll(p.dir); err == nil {
		err = rerr
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
