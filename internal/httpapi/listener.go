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

// NewHTTPServer is the http.Server of the daemon for h: headers must arrive
// within 10 s and stay under MaxHeaderBytes, idle connections close after
// two minutes, "OPTIONS *" reaches h (and its security headers), and
// net/http's own complaints go to log. There is no overall read or write
// timeout: streams are long. Bodies have theirs (Config.BodyTimeout).
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: MaxHeaderBytes, DisableGeneralOptionsHandler: true,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// LimitPerClient caps the connections one client address holds open at
// once. A connection past the cap is answered with a typed 429 rate_limited
// and closed, before any request is read from it. max <= 0 means no cap
// (behind a proxy every client has the proxy's address).
func LimitPerClient(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &clientLimiter{Listener: ln, max: max, open: map[netip.Addr]int{}}
}

type clientLimiter struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[netip.Addr]int
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
		if n >= l.max {
			l.mu.Unlock()
			go refuseConn(c, l.max)
			continue
		}
		l.open[addr] = n + 1
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.release(addr) })}, nil
	}
}

func (l *clientLimiter) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
func refuseConn(c net.Conn, max int) {
	defer c.Close()
	pe := protocol.Errorf(protocol.RateLimited, "this client already has %d connections open to the daemon; close some", max)
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
