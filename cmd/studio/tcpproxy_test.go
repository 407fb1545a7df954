package main

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards TCP connections to a target address, as the network
// between a daemon and its database does, until told to stop forwarding
// (stop): then it passes no byte either way and opens no new upstream
// connection, while keeping every connection open — a stuck proxy or a
// silently dropped link, which neither side notices by itself. resume
// lets the bytes held meanwhile through, as a healed link retransmits.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	open  chan struct{} // closed while forwarding
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newTCPProxy listens on a loopback port and forwards to target until the
// test ends.
func newTCPProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is where the proxy listens.
func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// stop stops forwarding; resume starts again.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

func (p *tcpProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// forwarding is the channel closed while (or once) the proxy forwards.
func (p *tcpProxy) forwarding() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *tcpProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil { // closed
		return false
	}
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one connection: it dials the target once the proxy
// forwards, then copies both ways through the gate.
func (p *tcpProxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.track(c, false)
	defer c.Close()
	<-p.forwarding() // a connection made while stopped hangs until resumed
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up, true) {
		up.Close()
		return
	}
	defer p.track(up, false)
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c); done <- struct{}{} }()
	go func() { p.pipe(c, up); done <- struct{}{} }()
	<-done // either side closed: close both, and wait for the other copy
	c.Close()
	up.Close()
	<-done
}

// pipe copies src to dst, each chunk waiting until the proxy forwards.
func (p *tcpProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.forwarding()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops the proxy and closes every connection.
func (p *tcpProxy) close() {
	p.ln.Close()
	p.resume()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
