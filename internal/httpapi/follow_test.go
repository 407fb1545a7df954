package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/modeltest"
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
	cl := apiclient.New(flaky.URL, testToken, flaky.Client())
	var got []protocol.Frame
	retries := 0
	err := cl.Follow(h.ctx(), c.ID, 0, func(error, time.Duration) { retries++ }, func(f protocol.Frame) error {
		got = append(got, f)
		if f.Type == protocol.FrameDone {
			return apiclient.ErrStopStream
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

// TestFollowProgress: the client hands the stream's status comments to its
// caller — a retry the model is waiting for, which no frame shows, then no
// turn once it is cancelled — and frames as before.
func TestFollowProgress(t *testing.T) {
	t.Parallel()
	fp := modeltest.NewAttempts(func(n int32) ([]model.Event, error) {
		return nil, &protocol.Error{Code: protocol.RateLimited, Message: "slow down", Retryable: true, RetryAfterMs: 600_000}
	})
	h := newHarness(t, harnessOpts{provider: fp, retryWait: 10 * time.Minute})
	c := h.conversation()
	acc := h.submit(c.ID, "hello")
	var states []string
	var done bool
	cancelled := make(chan error, 1)
	var cancelling bool
	err := h.client.FollowProgress(h.ctx(), c.ID, 0, nil, func(p *protocol.TurnProgress) {
		switch {
		case p == nil:
			states = append(states, "none")
		case p.RequestID != acc.RequestID:
			t.Errorf("progress of %s, want %s", p.RequestID, acc.RequestID)
		default:
			states = append(states, string(p.State))
			if p.State == protocol.ProgressRetrying && !cancelling {
				if p.Attempt != 2 || p.ErrorCode != protocol.RateLimited {
					t.Errorf("retrying: %+v", p)
				}
				cancelling = true
				go func() {
					_, err := h.client.Cancel(h.ctx(), c.ID, acc.RequestID)
					cancelled <- err
				}()
			}
		}
	}, func(f protocol.Frame) error {
		if f.Type == protocol.FrameDone {
			done = true
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cancelling {
		t.Fatalf("no retry was seen: %v", states)
	}
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	if !done || !slices.Contains(states, string(protocol.ProgressRetrying)) {
		t.Fatalf("done %v, states %v: want the retry seen before the end", done, states)
	}
}
