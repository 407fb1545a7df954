package httpapi

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeWatch notices stream clients closing their connections: one epoll
// set holds every stream's socket (edge-triggered, for input and the
// peer's close), and one goroutine reads its events. The set's own
// descriptor is read through Go's poller (os.File), so that goroutine
// parks like any reader instead of holding a thread in epoll_wait, and
// closing the file ends it.
type closeWatch struct {
	epfd int
	set  *os.File
	rc   syscall.RawConn
	done chan struct{}

	mu      sync.Mutex
	next    int32
	watched map[int32]*closeWatched
	// buf takes what clients send, discarded: only the poller reads it.
	buf [512]byte
}

// closeWatched is one stream's connection.
type closeWatched struct {
	rc    syscall.RawConn
	gone  func()
	input int // bytes the client sent after its request
}

func newCloseWatch() (*closeWatch, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	set := os.NewFile(uintptr(fd), "stream-closes")
	rc, err := set.SyscallConn()
	if err != nil {
		set.Close()
		return nil, err
	}
	w := &closeWatch{epfd: fd, set: set, rc: rc, done: make(chan struct{}), watched: make(map[int32]*closeWatched)}
	go w.run()
	return w, nil
}

// watch adds conn's socket to the set; gone is called when its client
// closes it. false: conn has no socket to watch.
func (w *closeWatch) watch(conn net.Conn, gone func()) (int32, bool) {
	rc, ok := rawConn(conn)
	if !ok {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		w.next++
		if _, used := w.watched[w.next]; !used && w.next != 0 {
			break
		}
	}
	tok := w.next
	var cerr error
	err := rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: tok}
		cerr = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		return 0, false
	}
	w.watched[tok] = &closeWatched{rc: rc, gone: gone}
	return tok, true
}

// unwatch takes conn's socket out of the set; call it before closing conn.
func (w *closeWatch) unwatch(tok int32, conn net.Conn) {
	w.mu.Lock()
	c := w.watched[tok]
	delete(w.watched, tok)
	w.mu.Unlock()
	if c != nil {
		_ = c.rc.Control(func(fd uintptr) {
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
		})
	}
}

func (w *closeWatch) run() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 128)
	for {
		var n int
		var werr error
		err := w.rc.Read(func(fd uintptr) bool {
			n, werr = unix.EpollWait(int(fd), events, 0)
			if errors.Is(werr, unix.EINTR) {
				n, werr = 0, nil
			}
			return n > 0 || werr != nil // none ready: park until the set is readable
		})
		if err != nil || werr != nil {
			return // closed
		}
		for _, ev := range events[:n] {
			w.event(ev)
		}
	}
}

// event handles one socket's readiness: the client closed its side (or
// the connection failed), or it sent something, which is read and
// dropped; an end of input, an error or more than maxStreamInput ends
// the stream.
func (w *closeWatch) event(ev unix.EpollEvent) {
	w.mu.Lock()
	c := w.watched[ev.Fd]
	w.mu.Unlock()
	if c == nil {
		return // unwatched meanwhile
	}
	if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 || !w.drain(c) {
		c.gone()
	}
}

// drain reads what the client sent until none is left (edge-triggered:
// the next input is a new event); false: the stream should end.
func (w *closeWatch) drain(c *closeWatched) bool {
	ok := true
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), w.buf[:])
			switch {
			case errors.Is(err, unix.EAGAIN):
				return true
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil || n == 0:
				ok = false
				return true
			}
			if c.input += n; c.input > maxStreamInput {
				ok = false
				return true
			}
		}
	})
	return ok && err == nil
}

// close ends the poller; the streams' sockets are theirs to close.
func (w *closeWatch) close() {
	w.set.Close()
	<-w.done
}
