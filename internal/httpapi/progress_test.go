package httpapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/modeltest"
	"github.com/studio/operator/internal/protocol"
)

// statusLines opens the conversation's stream and sends each status
// comment's JSON to the returned channel until the test ends.
func (h *harness) statusLines(convID string) <-chan string {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx(), http.MethodGet, h.srv.URL+"/api/operator/conversations/"+convID+"/stream?after_sequence=0", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		h.t.Fatalf("stream: %s", res.Status)
	}
	out := make(chan string, 64)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), ": status "); ok {
				out <- s
			}
		}
	}()
	return out
}

// nextStatus waits for a status comment whose active turn is in state (""
// for none) and returns it.
func (h *harness) nextStatus(lines <-chan string, state protocol.ProgressState) *protocol.TurnProgress {
	h.t.Helper()
	for {
		select {
		case s, ok := <-lines:
			if !ok {
				h.t.Fatalf("the stream ended before status %q", state)
			}
			var v struct {
				ActiveTurn *protocol.TurnProgress `json:"activeTurn"`
			}
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				h.t.Fatalf("status %s: %v", s, err)
			}
			if (v.ActiveTurn == nil && state == "") || (v.ActiveTurn != nil && v.ActiveTurn.State == state) {
				return v.ActiveTurn
			}
		case <-h.ctx().Done():
			h.t.Fatalf("no status %q", state)
		}
	}
}

// TestTurnProgress: while the model retries, GET conversation
// and the stream's status comment say retrying with the attempt, the error
// and when; a turn behind it waits queued at position 1; when the turns end
// the status says no turn runs. No frame is added for any of it.
func TestTurnProgress(t *testing.T) {
	t.Parallel()
	fp := modeltest.NewAttempts(func(n int32) ([]model.Event, error) {
		if n == 0 {
			return nil, &protocol.Error{Code: protocol.RateLimited, Message: "slow down", Retryable: true, RetryAfterMs: 600_000}
		}
		return []model.Event{{Kind: model.EventText, Text: "ok"}}, nil
	})
	h := newHarness(t, harnessOpts{provider: fp, workers: 1, retryWait: 10 * time.Minute})
	first, second := h.conversation(), h.conversation()
	lines := h.statusLines(first.ID)
	if p := h.nextStatus(lines, ""); p != nil {
		t.Fatalf("an idle conversation's status: %+v", p)
	}
	acc := h.submit(first.ID, "hello")
	p := h.nextStatus(lines, protocol.ProgressRetrying)
	if p.RequestID != acc.RequestID || p.Attempt != 2 || p.ErrorCode != protocol.RateLimited ||
		p.RetryAt < protocol.Timestamp(h.clock.Now().Add(9*time.Minute)) {
		t.Fatalf("retrying status %+v", p)
	}
	page, err := h.client.GetConversation(h.ctx(), first.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if a := page.ActiveTurn; a == nil || a.State != protocol.ProgressRetrying || a.Attempt != 2 || a.RetryAt != p.RetryAt {
		t.Fatalf("GET conversation's active turn: %+v", a)
	}
	frames := len(page.Frames)

	// The only worker is busy retrying: the next turn waits first in line.
	acc2 := h.submit(second.ID, "hello")
	page2, err := h.client.GetConversation(h.ctx(), second.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if a := page2.ActiveTurn; a == nil || a.RequestID != acc2.RequestID || a.State != protocol.ProgressQueued || a.QueuePosition != 1 {
		t.Fatalf("the queued turn's progress: %+v", a)
	}

	if _, err := h.client.Cancel(h.ctx(), first.ID, acc.RequestID); err != nil {
		t.Fatal(err)
	}
	h.nextStatus(lines, "")
	h.waitDone(second.ID, acc2.RequestID)
	page2, err = h.client.GetConversation(h.ctx(), second.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if page2.ActiveTurn != nil {
		t.Fatalf("an ended turn still has progress: %+v", page2.ActiveTurn)
	}
	all := h.allFrames(first.ID)
	if len(all) < frames {
		t.Fatalf("frames went missing: %d then %d", frames, len(all))
	}
	for _, f := range all {
		if f.Type != protocol.FrameText && f.Type != protocol.FrameDone && f.Type != protocol.FrameError {
			t.Fatalf("progress became a frame: %+v", f)
		}
	}
}
