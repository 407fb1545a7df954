package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
)

// cutWriter lets the first frame through, then aborts the connection.
type cutWriter struct {
	http.ResponseWriter
}

func (w *cutWriter) Write(b []byte) (int, error) {
	i := bytes.Index(b, []byte("\ndata: "))
	if i < 0 {
		return w.ResponseWriter.Write(b)
	}
	end := i + bytes.Index(b[i:], []byte("\n\n")) + 2
	w.ResponseWriter.Write(b[:end])
	w.Flush()
	panic(http.ErrAbortHandler)
}

func (w *cutWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func TestFollowReconnectsFromItsCursor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	acc := h.submit(c.ID, "hello")
	want := h.waitDone(c.ID, acc.RequestID)

	var streams atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stream") {
			switch streams.Add(1) {
			case 1:
				http.Error(w, "bad gateway", http.StatusBadGateway) // not a protocol error: retry
				return
			case 2:
				h.api.ServeHTTP(&cutWriter{ResponseWriter: w}, r) // dies after one frame
				return
			}
		}
		h.api.ServeHTTP(w, r)
	}))
	defer flaky.Close()
	cl := httpapi.NewClient(flaky.URL, testToken, flaky.Client())
	var got []protocol.Frame
	retries := 0
	err := cl.Follow(h.ctx(), c.ID, 0, func(error, time.Duration) { retries++ }, func(f protocol.Frame) error {
		got = append(got, f)
		if f.Type == protocol.FrameDone {
			return httpapi.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if retries != 2 || len(got) != len(want) {
		t.Fatalf("retries %d, frames %d of %d", retries, len(got), len(want))
	}
	for i := range want {
		if got[i].Sequence != want[i].Sequence {
			t.Fatalf("frame %d: sequence %d, want %d (no gap, no repeat)", i, got[i].Sequence, want[i].Sequence)
		}
	}
	// A typed error ends Follow: it is not a transport failure.
	err = cl.Follow(h.ctx(), "6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1", 0, nil, func(protocol.Frame) error { return nil })
	wantCode(t, err, protocol.NotFound)
}
