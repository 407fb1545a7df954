package httpapi

import (
	"net"
	"syscall"
)

// maxStreamInput is what a client may send on a stream's connection after
// its request before the stream ends: a stream reads nothing, and a client
// that keeps writing is not one.
const maxStreamInput = 4 << 10

// watchStreamConn follows a stream's connection taken over until the
// client closes it (or sends more than maxStreamInput), then calls gone.
// end closes the connection (dropConn) and stops following it; call it
// once, when the stream is over.
//
// Where it can (Linux, a socket), one poller follows every stream's
// connection (closeWatch): an idle stream then costs one goroutine, not
// two. Elsewhere a goroutine per stream reads the connection.
func (s *Server) watchStreamConn(conn net.Conn, gone func()) (end func()) {
	if w := s.closeWatch(); w != nil {
		if tok, ok := w.watch(conn, gone); ok {
			return func() {
				w.unwatch(tok, conn)
				s.dropConn(conn)
			}
		}
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		readUntilClosed(conn, gone)
	}()
	return func() {
		s.dropConn(conn)
		<-watched // the close ends its read
	}
}

// closeWatch is the server's poller of streams' connections, started by
// the first stream; nil where there is none.
func (s *Server) closeWatch() *closeWatch {
	s.closesOnce.Do(func() {
		w, err := newCloseWatch()
		if err != nil {
			s.log.Warn("streams' close poller unavailable: a goroutine per stream watches its connection", "err", err)
			return
		}
		s.closes = w
	})
	return s.closes
}

// readUntilClosed reads conn until the client closes it (or sends more
// than maxStreamInput), then calls done.
func readUntilClosed(conn net.Conn, done func()) {
	defer done()
	var b [64]byte
	for n := 0; n <= maxStreamInput; {
		m, err := conn.Read(b[:])
		if err != nil {
			return
		}
		n += m
	}
}

// rawConn is the socket under conn, through the listeners' wrappers
// (NetConn); false when it has none.
func rawConn(conn net.Conn) (syscall.RawConn, bool) {
	for {
		if sc, ok := conn.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			return rc, err == nil
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		conn = u.NetConn()
	}
}
