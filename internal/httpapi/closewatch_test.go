package httpapi_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/testutil"
)

// openRawStream opens a conversation's stream on a connection of its own
// and reads its head and first line.
func openRawStream(t *testing.T, addr, convID string) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	conn, rd := rawRequest(t, addr, "GET /api/operator/conversations/"+convID+"/stream HTTP/1.1\r\nHost: "+addr+"\r\n"+
		"Authorization: Bearer "+testToken+"\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a safety net
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open: %v %v", resp, err)
	}
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream opened with %q: %v", line, err)
	}
	return conn.(*net.TCPConn), rd
}

// readToEnd reads the stream until the server closes the connection; it
// fails the test if the safety net's deadline comes first.
func readToEnd(t *testing.T, rd *bufio.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, rd)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server never ended the stream")
	}
}

// A stream ends when its client half-closes the connection or sends more
// than a stream takes; a client that sends a little keeps its stream. With
// an hour between heartbeats, only the stream's watch of its connection
// can end it.
func TestStreamEndsOnItsClientsInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{heartbeat: time.Hour})
	c := h.conversation()
	srv := httptest.NewServer(h.api)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	t.Run("half-close", func(t *testing.T) {
		conn, rd := openRawStream(t, addr, c.ID)
		if err := conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		readToEnd(t, rd)
	})
	t.Run("too much input", func(t *testing.T) {
		conn, rd := openRawStream(t, addr, c.ID)
		go func() { _, _ = conn.Write(make([]byte, 8<<10)) }()
		readToEnd(t, rd)
	})
}

// A client that sends a few bytes on its stream's connection keeps the
// stream: its heartbeats still come.
func TestStreamOutlivesALittleInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{heartbeat: 20 * time.Millisecond})
	c := h.conversation()
	srv := httptest.NewServer(h.api)
	t.Cleanup(srv.Close)
	conn, rd := openRawStream(t, srv.Listener.Addr().String(), c.ID)
	if _, err := conn.Write([]byte("hello\r\n")); err != nil {
		t.Fatal(err)
	}
	for beats := 0; beats < 3; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %d heartbeats: %v", beats, err)
		}
		if strings.HasPrefix(line, ": heartbeat") {
			beats++
		}
	}
}

// An idle stream on Linux costs one goroutine: its connection is watched
// by the server's one poller, not by a reader of its own. Not parallel:
// the count is the process's.
func TestIdleStreamsCostOneGoroutine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the close poller is Linux's")
	}
	h := newHarness(t, harnessOpts{heartbeat: time.Hour})
	c := h.conversation()
	srv := httptest.NewServer(h.api)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	openRawStream(t, addr, c.ID) // the server's first stream starts its poller and wheel
	const n = 200
	before := runtime.NumGoroutine()
	for range n {
		openRawStream(t, addr, c.ID)
	}
	// The connections' serving goroutines end once their streams are
	// handed over; what is left per stream is the stream's own.
	perStream := func() float64 { return float64(runtime.NumGoroutine()-before) / n }
	testutil.Eventually(t, func() bool { return perStream() <= 1.1 }, "one goroutine per idle stream")
}
