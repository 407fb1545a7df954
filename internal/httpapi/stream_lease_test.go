package httpapi_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// testLease is a lease the test holds or lets lapse, telling its watchers
// at each change (an httpapi.LeaseWatcher, as lease.Keeper is).
type testLease struct {
	mu      sync.Mutex
	err     error
	changed chan struct{}
}

func (l *testLease) Held(time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *testLease) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// set makes Held answer err (nil: held) and wakes the watchers.
func (l *testLease) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// leaseComment is a stream's lease comment.
type leaseComment struct {
	State        string `json:"state"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Message      string `json:"message"`
}

// nextLease reads the stream's next lease comment.
func (rs *rawStream) nextLease(t *testing.T) leaseComment {
	t.Helper()
	_ = rs.conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a safety net only
	for {
		line, err := rs.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream for its lease comment: %v", err)
		}
		if body, ok := strings.CutPrefix(line, ": lease "); ok {
			var c leaseComment
			if err := json.Unmarshal([]byte(body), &c); err != nil {
				t.Fatalf("lease comment %q: %v", line, err)
			}
			return c
		}
	}
}

// postConfirm confirms prop over the wire and returns the status, the
// Retry-After header and the typed error of the answer.
func (h *harness) postConfirm(convID string, prop protocol.CommandProposal) (int, string, *protocol.Error) {
	h.t.Helper()
	body, err := json.Marshal(confirmReq(prop))
	if err != nil {
		h.t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(h.ctx(), "POST", h.srv.URL+"/api/operator/conversations/"+convID+"/proposals/"+prop.ID+"/confirm", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Error *protocol.Error `json:"error"`
	}
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, resp.Header.Get("Retry-After"), out.Error
}

// TestStreamsAndDecisionsWhileTheLeaseIsUnproven: a daemon sharing its
// database whose lease cannot be proven says so on its open streams at
// once and on a stream opened meanwhile (an SSE comment with a retry
// hint); a confirm sent to it is refused with 503 service_failure,
// lease_unproven, a Retry-After header, and the proposal stays pending.
// Once renewed, its streams say the lease is held and the same confirm
// goes through.
func TestStreamsAndDecisionsWhileTheLeaseIsUnproven(t *testing.T) {
	t.Parallel()
	l := &testLease{}
	h := newHarness(t, harnessOpts{script: &proposalScript, lease: l})
	c := h.conversation()
	acc, prop := h.proposed(c.ID)
	h.waitTurnStatus(acc.RequestID, "awaiting_confirmation")
	open := h.openRaw(c.ID, 0)

	l.set(errors.New("renewals failed for longer than the expiry"))
	if got := open.nextLease(t); got.State != "unproven" || got.RetryAfterMs != 1000 || !strings.Contains(got.Message, "renewals failed") {
		t.Fatalf("the open stream said %+v, want unproven with a retry hint and the cause", got)
	}
	opened := h.openRaw(c.ID, 0)
	if got := opened.nextLease(t); got.State != "unproven" {
		t.Fatalf("a stream opened while the lease is unproven said %+v", got)
	}
	status, retry, perr := h.postConfirm(c.ID, prop)
	if status != http.StatusServiceUnavailable || retry != "1" || perr == nil || perr.Code != protocol.ServiceFailure ||
		perr.Details["reason"] != "lease_unproven" || !perr.Retryable {
		t.Fatalf("confirm while the lease is unproven = %d, Retry-After %q, %+v; want 503, 1, service_failure lease_unproven", status, retry, perr)
	}
	if p, err := h.client.Proposal(h.ctx(), prop.ID); err != nil || p.Status != "pending" {
		t.Fatalf("the refused confirm's proposal: %+v, %v", p, err)
	}

	l.set(nil)
	for _, rs := range []*rawStream{open, opened} {
		if got := rs.nextLease(t); got.State != "held" || got.RetryAfterMs != 0 || got.Message != "" {
			t.Fatalf("a stream said %+v once the lease was renewed, want held", got)
		}
	}
	res, err := h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm once renewed = %+v, %v", res, err)
	}
	h.waitDone(c.ID, acc.RequestID)
}
