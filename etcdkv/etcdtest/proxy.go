package etcdtest

import (
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from a loopback port to one member, and
// can misbehave on demand: drop what the client sends, drop what the
// member answers, cut every connection. A client given only the proxy's
// endpoint then sees exactly the failures a test arranges.
type Proxy struct {
	l       net.Listener
	target  string
	dropReq atomic.Bool
	dropRes atomic.Bool
	refuse  atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port or a URL of the form http://host:port).
func NewProxy(target string) (*Proxy, error) {
	if u, ok := hostOf(target); ok {
		target = u
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func hostOf(s string) (string, bool) {
	const scheme = "http://"
	if len(s) > len(scheme) && s[:len(scheme)] == scheme {
		return s[len(scheme):], true
	}
	return s, false
}

// Endpoint is the proxy's URL, for a client.
func (p *Proxy) Endpoint() string { return "http://" + p.l.Addr().String() }

// DropRequests makes the proxy discard what clients send, on the
// connections open now and later, until called with false.
func (p *Proxy) DropRequests(on bool) { p.dropReq.Store(on) }

// DropResponses makes the proxy discard what the member answers.
func (p *Proxy) DropResponses(on bool) { p.dropRes.Store(on) }

// Refuse makes the proxy close new connections at once.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Cut closes every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	err := p.l.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, &p.dropReq)
		go p.pipe(c, s, &p.dropRes)
	}
}

// pipe copies from src to dst, discarding while drop is set; when either
// side ends it closes both.
func (p *Proxy) pipe(dst, src net.Conn, drop *atomic.Bool) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !drop.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection
		}
	}
}
