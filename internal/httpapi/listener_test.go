package httpapi_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
)

// One client address holds at most max connections; the
// next is answered with a typed 429 and closed, and a freed slot is usable
// again.
func TestConnectionsPerClientAreCapped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Listener = httpapi.LimitPerClient(srv.Listener, 2)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	// get sends one request on a connection and reads the answer.
	get := func(c net.Conn) *http.Response {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if resp := get(c); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d", len(held), resp.StatusCode)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	resp := get(over)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), `"code":"rate_limited"`) ||
		!strings.Contains(string(b), `"retryAfterMs":1000`) || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("the third connection: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	// Closing one frees its slot; the server notices when it reads EOF, so
	// a new connection is tried until it is served.
	held[0].Close()
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp := get(c)
		c.Close()
		if resp.StatusCode == 200 {
			break
		}
		if i > 1000 {
			t.Fatal("the slot was never freed")
		}
	}
}
