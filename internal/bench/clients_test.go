package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClients drives the clients' protocol (in-process, the code the
// clients process runs) against an SSE server in Centrifugo's shape: every
// stream opens before "ready", each publication's stamp is timed to its
// arrival, the end of every stream is told, and only what was sent within
// the stop's window counts.
func TestClients(t *testing.T) {
	t.Parallel()
	base := time.Now()
	stamps := []time.Time{base.Add(-time.Hour), base, base.Add(time.Millisecond), base.Add(time.Hour)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/connection/uni_sse" || !strings.Contains(r.URL.Query().Get("cf_connect"), `"bench-`) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Connection", "close") // the stream ends with the response
		fmt.Fprint(w, "data: {\"connect\":{}}\n\n")
		for _, s := range stamps {
			fmt.Fprintf(w, "data: {\"pub\":{\"data\":{\"t\":%d,\"p\":\"x\"}}}\n\n", s.UnixNano())
		}
	}))
	defer srv.Close()
	job := clientJob{Kind: clientCentrifugo, Base: srv.URL, Targets: []string{"bench-0", "bench-0", "bench-1"}}
	cl, err := startClients(t.Context(), job, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The server ends each stream after its four publications: once every
	// stream has ended, everything was read.
	select {
	case <-cl.ended:
	case <-time.After(time.Minute):
		t.Fatal("the clients did not say their streams ended")
	}
	res, err := cl.stop(base, base.Add(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames.Count != 6 || res.Frames.P50Ms <= 0 || res.Tokens.Count != 0 {
		t.Fatalf("clients: %+v, want the 2 publications in the window on each of 3 streams, timed", res)
	}
	// A stream the server refuses fails the start with its status.
	if _, err := startClients(t.Context(), clientJob{Kind: clientCentrifugo, Base: srv.URL, Targets: []string{"other"}}, true, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a refused stream: %v, want its 404", err)
	}
}
