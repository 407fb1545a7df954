package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// DefaultMaxClientConns is how many connections one client address may hold
// open at once: far above a browser (six per host) and the CLI, far below
// what exhausts the daemon's file descriptors.
const DefaultMaxClientConns = 256

// ReadHeaderTimeout is how long a request's line and headers may take to
// arrive, on every listener of the daemon.
const ReadHeaderTimeout = 10 * time.Second

// NewHTTPServer is the http.Server of the daemon for h: headers must arrive
// within ReadHeaderTimeout and stay under MaxHeaderBytes, idle connections
// close after two minutes, "OPTIONS *" reaches h (and its security
// headers), and net/http's own complaints go to log. There is no overall
// read or write timeout: streams are long. Bodies have theirs
// (Config.BodyTimeout, set by the edge before any other check).
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: MaxHeaderBytes, DisableGeneralOptionsHandler: true,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// MetricsWriteTimeout bounds an answer of the --metrics-addr listener,
// which serves no stream: the longest is a CPU profile or trace of a
// minute.
const MetricsWriteTimeout = 2 * time.Minute

// NewMetricsServer is the http.Server of the --metrics-addr listener: the
// daemon's (NewHTTPServer) with a write timeout, since nothing there
// streams.
func NewMetricsServer(h http.Handler, log *slog.Logger) *http.Server {
	srv := NewHTTPServer(h, log)
	srv.WriteTimeout = MetricsWriteTimeout
	return srv
}

// DefaultMaxConns is how many connections the daemon's listener holds open
// at once, all clients together: above the idle streams a daemon is
// measured with (studio bench: 10 000), below the file descriptors Go
// raises a process's limit to.
const DefaultMaxConns = 16384

// Caps of the --metrics-addr listener: a scraper or an operator's pprof
// needs a handful, and whatever floods it must not take the descriptors the
// main listener and the database need.
const (
	MetricsMaxConns       = 64
	MetricsMaxClientConns = 16
)

// maxRefusing bounds the refusals written at once; past it a connection
// over a cap is closed without an answer, so a flood costs no more than
// the caps and this many descriptors.
const maxRefusing = 64

// LimitPerClient caps the connections one client address holds open at
// once. A connection past the cap is answered with a typed 429 rate_limited
// and closed, before any request is read from it. max <= 0 means no cap
// (behind a proxy every client has the proxy's address).
func LimitPerClient(ln net.Listener, max int) net.Listener { return LimitConns(ln, max, 0) }

// LimitConns caps the connections one client address holds open at once
// (perClient) and those of all clients together (total); <= 0 is no cap.
// A connection over either is answered with a typed 429 rate_limited and
// closed, before any request is read from it.
func LimitConns(ln net.Listener, perClient, total int) net.Listener {
	if perClient <= 0 && total <= 0 {
		return ln
	}
	return &clientLimiter{Listener: ln, max: perClient, total: total, open: map[netip.Addr]int{}, refusing: make(chan struct{}, maxRefusing)}
}

type clientLimiter struct {
	net.Listener
	max, total int
	refusing   chan struct{} // a token per refusal being written
	mu         sync.Mutex
	open       map[netip.Addr]int
	all        int
}

func (l *clientLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c.RemoteAddr())
		l.mu.Lock()
		n := l.open[addr]
		var msg string
		switch {
		case l.max > 0 && n >= l.max:
			msg = fmt.Sprintf("this client already has %d connections open to the daemon; close some", l.max)
		case l.total > 0 && l.all >= l.total:
			msg = fmt.Sprintf("this listener already holds %d connections, its most; try again shortly", l.total)
		}
		if msg != "" {
			l.mu.Unlock()
			l.refuse(c, msg)
			continue
		}
		l.open[addr] = n + 1
		l.all++
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.release(addr) })}, nil
	}
}

// refuse answers c in a goroutine of its own, or closes it at once when
// maxRefusing answers are being written already.
func (l *clientLimiter) refuse(c net.Conn, msg string) {
	select {
	case l.refusing <- struct{}{}:
		go func() {
			defer func() { <-l.refusing }()
			refuseConn(c, msg)
		}()
	default:
		c.Close()
	}
}

func (l *clientLimiter) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// clientAddr is the IP of a remote address (IPv4 in IPv6 unmapped), or the
// zero address for other networks, which then share one count.
func clientAddr(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// NetConn is the connection under the slot (a stream's close poller
// watches its socket).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite keeps net/http's half-close (closeWriteAndWait) working.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refuseConn answers a connection over the cap with a typed 429 and closes
// it, writing first and then draining briefly, so that the client reads the
// answer rather than a reset.
func refuseConn(c net.Conn, msg string) {
	defer c.Close()
	pe := protocol.Errorf(protocol.RateLimited, "%s", msg)
	pe.RetryAfterMs = 1000
	body, _ := protocol.Marshal(protocol.ErrorBody{Error: pe})
	var head strings.Builder
	fmt.Fprintf(&head, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"+
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n", len(body)+1)
	for _, kv := range securityHeaderValues {
		fmt.Fprintf(&head, "%s: %s\r\n", kv[0], kv[1])
	}
	head.WriteString("\r\n")
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, head.String()+string(body)+"\n"); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}
