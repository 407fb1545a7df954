package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
)

// operatorRoutes is every /api route of the operator protocol, with ids filled in.
func operatorRoutes(convID, requestID string) [][2]string {
	base := "/api/operator/conversations/" + convID
	return [][2]string{
		{"POST", "/api/operator/conversations"},
		{"GET", "/api/operator/conversations"},
		{"GET", base},
		{"PATCH", base},
		{"DELETE", base},
		{"POST", base + "/turns"},
		{"POST", base + "/requests/" + requestID + "/cancel"},
		{"GET", base + "/stream?after_sequence=0"},
		{"POST", base + "/effects/6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1/ack"},
		{"POST", base + "/proposals/6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1/confirm"},
		{"POST", base + "/proposals/6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1/deny"},
		{"POST", "/api/operator/stream-tickets"},
		{"GET", "/api/operator/routes"},
		{"GET", "/api/operator/tools"},
		{"GET", "/api/no/such/route"},
		{"GET", "/metrics"},
	}
}

func TestEveryRouteRequiresTheBearerToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	acc := h.submit(c.ID, "hi")
	h.waitDone(c.ID, acc.RequestID)
	for _, rt := range operatorRoutes(c.ID, acc.RequestID) {
		for _, variant := range []string{"no token", "wrong token", "token in query", "token in query and header", "basic auth"} {
			u := h.srv.URL + rt[1]
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			if strings.Contains(variant, "query") {
				u += sep + "token=" + url.QueryEscape(testToken)
			}
			req, _ := http.NewRequest(rt[0], u, strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			switch variant {
			case "wrong token":
				req.Header.Set("Authorization", "Bearer "+testToken[:len(testToken)-1]+"x")
			case "token in query and header":
				req.Header.Set("Authorization", "Bearer "+testToken)
			case "basic auth":
				req.SetBasicAuth("studio", testToken)
			}
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.Contains(string(body), `"code":"auth_required"`) {
				t.Errorf("%s %s with %s: %d %s", rt[0], rt[1], variant, resp.StatusCode, body)
			}
			if strings.Contains(string(body), testToken) {
				t.Errorf("%s %s echoes the token", rt[0], rt[1])
			}
		}
	}
	// The health check is open.
	resp, err := h.srv.Client().Get(h.srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestStreamTickets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	other := h.conversation()
	acc := h.submit(c.ID, "hi")
	frames := h.waitDone(c.ID, acc.RequestID)
	ctx := h.ctx()
	ticket := func(conv string, after int64) string {
		t.Helper()
		tk, err := h.client.CreateTicket(ctx, protocol.StreamTicketRequest{ConversationID: conv, AfterSequence: after})
		if err != nil {
			t.Fatal(err)
		}
		if tk.Ticket == testToken || len(tk.Ticket) < 40 {
			t.Fatalf("ticket %q is not a fresh random credential", tk.Ticket)
		}
		want := protocol.Timestamp(h.clock.Now().Add(60 * time.Second))
		if tk.ExpiresAt != want {
			t.Fatalf("expiresAt %v, want %v", tk.ExpiresAt, want)
		}
		return tk.Ticket
	}
	readAll := func(tk, conv string, after int64) ([]protocol.Frame, error) {
		var got []protocol.Frame
		err := h.client.StreamWithTicket(ctx, conv, after, tk, func(f protocol.Frame) error {
			got = append(got, f)
			if f.Sequence == int64(len(frames)) {
				return errStop
			}
			return nil
		})
		if err == errStop {
			err = nil
		}
		return got, err
	}

	tk := ticket(c.ID, 1)
	got, err := readAll(tk, c.ID, 1)
	if err != nil || len(got) != len(frames)-1 || got[0].Sequence != 2 {
		t.Fatalf("ticket stream: %d frames, %v", len(got), err)
	}
	// Used twice.
	_, err = readAll(tk, c.ID, 1)
	wantCode(t, err, protocol.AuthRequired)
	// Another conversation, another cursor.
	tk = ticket(c.ID, 0)
	_, err = readAll(tk, other.ID, 0)
	wantCode(t, err, protocol.AuthRequired)
	tk = ticket(c.ID, 0)
	_, err = readAll(tk, c.ID, 2)
	wantCode(t, err, protocol.AuthRequired)
	// Expired: 60 s on the fake clock.
	tk = ticket(c.ID, 0)
	h.clock.Advance(60 * time.Second)
	_, err = readAll(tk, c.ID, 0)
	wantCode(t, err, protocol.AuthRequired)
	// Just inside the window works.
	tk = ticket(c.ID, 0)
	h.clock.Advance(59 * time.Second)
	if _, err := readAll(tk, c.ID, 0); err != nil {
		t.Fatalf("ticket within 60 s: %v", err)
	}
	// The bearer token is never a ticket, and a ticket is never a bearer token.
	_, err = readAll(testToken, c.ID, 0)
	wantCode(t, err, protocol.AuthRequired)
	tk = ticket(c.ID, 0)
	req, _ := http.NewRequest("GET", h.srv.URL+"/api/operator/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+tk)
	resp, err := h.srv.Client().Do(req)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("ticket as bearer: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	// Tickets work on the stream endpoint only.
	req, _ = http.NewRequest("GET", h.srv.URL+"/api/operator/conversations/"+c.ID+"?ticket="+url.QueryEscape(tk), nil)
	resp, err = h.srv.Client().Do(req)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("ticket on a non-stream route: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

var errStop = protocol.Errorf(protocol.Cancelled, "test stop")

func TestCancelQueuedAndRunning(t *testing.T) {
	t.Parallel()
	// "working " ends its word: a word still being written is held back
	// until it ends (it could be the start of a token).
	slow := script.Script{Turns: []script.Turn{{Steps: []script.Step{{Text: ptr("working ")}, {SleepMs: ptr(int64(60_000))}, {Text: ptr("never")}}}}}
	h := newHarness(t, harnessOpts{script: &slow, workers: 1})
	ctx := h.ctx()
	a, b := h.conversation(), h.conversation()
	running := h.submit(a.ID, "first")
	// Wait until the first turn is running and has spoken.
	h.until(a.ID, 0, func(f protocol.Frame) bool {
		p, ok := f.Payload.(protocol.TextPayload)
		return ok && p.Content == "working "
	})
	queued := h.submit(b.ID, "second") // the only worker is busy
	turn, err := h.client.Cancel(ctx, b.ID, queued.RequestID)
	if err != nil || turn.Status != "cancelled" || turn.CancelRequestedAt == nil {
		t.Fatalf("cancel queued: %+v %v", turn, err)
	}
	qf := h.waitDone(b.ID, queued.RequestID)
	if d := qf[len(qf)-1].Payload.(protocol.DonePayload); d.Outcome != protocol.OutcomeCancelled || len(qf) != 2 {
		t.Fatalf("queued turn frames: %+v", qf)
	}
	// Cancelling the running turn ends it with done(cancelled).
	turn, err = h.client.Cancel(ctx, a.ID, running.RequestID)
	if err != nil || turn.CancelRequestedAt == nil {
		t.Fatalf("cancel running: %+v %v", turn, err)
	}
	rf := h.waitDone(a.ID, running.RequestID)
	if d := rf[len(rf)-1].Payload.(protocol.DonePayload); d.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("running turn outcome %s", d.Outcome)
	}
	// Idempotent: cancelling again answers the final state unchanged.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			again, err := h.client.Cancel(ctx, a.ID, running.RequestID)
			if err != nil || again.Status != "cancelled" || *again.EndedAt != *h.turnEnded(a.ID, running.RequestID) {
				t.Errorf("repeat cancel: %+v %v", again, err)
			}
		})
	}
	wg.Wait()
	// Exactly one done per accepted turn, and the conversations accept new turns.
	for _, conv := range []string{a.ID, b.ID} {
		all := h.allFrames(conv)
		for _, rid := range []string{running.RequestID, queued.RequestID} {
			if n := countDone(all, rid); n > 1 {
				t.Fatalf("request %s has %d done frames", rid, n)
			}
		}
	}
	next := h.submit(b.ID, "third")
	if _, err := h.client.Cancel(ctx, b.ID, next.RequestID); err != nil {
		t.Fatal(err)
	}
	h.waitDone(b.ID, next.RequestID)
	// Cancel with a request of another conversation is not_found.
	_, err = h.client.Cancel(ctx, a.ID, queued.RequestID)
	wantCode(t, err, protocol.NotFound)
}

func (h *harness) turnEnded(convID, requestID string) *float64 {
	t, err := h.client.Cancel(h.ctx(), convID, requestID)
	if err != nil {
		h.t.Fatal(err)
	}
	return t.EndedAt
}

// Without StateDB every authenticated call is a 503 and the open health
// check says degraded, nothing more; with the token it says why. No answer
// names the database's path.
func TestUnavailableStateDBAnswers503(t *testing.T) {
	t.Parallel()
	const reason = "migrate /var/lib/studio/state/studio.db: migration 0002 failed"
	srv := httptest.NewServer(httpapi.Unavailable(httpapi.Config{Token: testToken}, reason))
	defer srv.Close()
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(b), "/var/lib") {
			t.Errorf("GET %s names the database path: %s", path, b)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get("/api/operator/conversations", testToken); code != 503 || !strings.Contains(body, `"service_failure"`) ||
		!strings.Contains(body, "migration 0002 failed") {
		t.Fatalf("with token: %d %s", code, body)
	}
	if code, _ := get("/api/operator/conversations", ""); code != 401 {
		t.Fatalf("without token: %d", code)
	}
	if code, body := get("/healthz", ""); code != 503 || strings.TrimSpace(body) != `{"status":"degraded"}` {
		t.Fatalf("open healthz: %d %s", code, body)
	}
	if code, body := get("/healthz", testToken); code != 503 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, "migration 0002 failed") {
		t.Fatalf("healthz with the token: %d %s", code, body)
	}
	if code, body := get("/readyz", ""); code != 503 || strings.TrimSpace(body) != `{"status":"not_ready","reason":"database unavailable"}` {
		t.Fatalf("open readyz: %d %s", code, body)
	}
	if code, body := get("/readyz", testToken); code != 503 || !strings.Contains(body, "migration 0002 failed") {
		t.Fatalf("readyz with the token: %d %s", code, body)
	}
}
