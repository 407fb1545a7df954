package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// hookReceiver is a webhook endpoint in the test process: down (500)
// while down is set; up, it keeps every request and hands it on.
type hookReceiver struct {
	srv     *httptest.Server
	down    atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	ids     map[string]int
	got     chan hookRequest
}

type hookRequest struct {
	id, timestamp, signature string
	body                     []byte
	event                    struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{ids: map[string]int{}, got: make(chan hookRequest, 64)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.down.Load() {
			r.refused.Add(1)
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		hr := hookRequest{id: req.Header.Get("webhook-id"), timestamp: req.Header.Get("webhook-timestamp"),
			signature: req.Header.Get("webhook-signature"), body: body}
		_ = json.Unmarshal(body, &hr.event)
		r.mu.Lock()
		r.ids[hr.id]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		r.got <- hr
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) times(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

// signedBy checks a request as a Standard Webhooks receiver does, from the
// specification: HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed by the
// base64 after whsec_, in a "v1,<base64>" entry of webhook-signature.
func signedBy(secret string, r hookRequest) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.id + "." + r.timestamp + "." + string(r.body)))
	for _, sig := range strings.Fields(r.signature) {
		if b64, ok := strings.CutPrefix(sig, "v1,"); ok {
			if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, mac.Sum(nil)) {
				return true
			}
		}
	}
	return false
}

// await waits for the receiver to take the event for which match holds.
func (r *hookReceiver) await(t *testing.T, d *daemon, what string, match func(hookRequest) bool) hookRequest {
	t.Helper()
	timeout := time.After(60 * time.Second) // a safety net: the first retry comes within 10 s
	for {
		select {
		case hr := <-r.got:
			if match(hr) {
				return hr
			}
		case <-timeout:
			t.Fatalf("no %s delivered (%d refused):\n%s", what, r.refused.Load(), d.Logs())
		}
	}
}

// TestProcessWebhookSurvivesKill9: a proposal becomes pending while the
// receiver is down, and the daemon is killed (SIGKILL) right after; the
// restarted daemon delivers the proposal.pending event, signed, once.
// The webhook is added and inspected with the CLI.
func TestProcessWebhookSurvivesKill9(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	rcv := newHookReceiver(t)
	rcv.down.Store(true)
	d := startDaemon(t, dataDir, "--public-url", "https://studio.example.com")
	bin, _ := buildBinary()
	run := func(url string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--data-dir", dataDir}, args...)...)
		cmd.Env = append(os.Environ(), "STUDIO_URL="+url, "STUDIO_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("studio %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run(d.URL, "webhooks", "add", rcv.srv.URL+"/hook", "--events", "proposal.pending,proposal.decided")
	secret := regexp.MustCompile(`(?m)^(whsec_[A-Za-z0-9+/=]+)$`).FindStringSubmatch(out)
	hookID := regexp.MustCompile(`# webhook (wh_[0-9a-f]+):`).FindStringSubmatch(out)
	if secret == nil || hookID == nil {
		t.Fatalf("webhooks add: %s", out)
	}
	if out := run(d.URL, "webhooks", "list"); !strings.Contains(out, hookID[1]) || !strings.Contains(out, "proposal.pending,proposal.decided") || strings.Contains(out, secret[1]) {
		t.Fatalf("webhooks list: %s", out)
	}
	if out, err := exec.Command(bin, "--data-dir", dataDir, "--server", d.URL, "webhooks", "add", "ftp://x", "--events", "turn.failed").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "http or https") {
		t.Fatalf("webhooks add ftp://: %v %s", err, out)
	}

	ctx := testCtx(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "vacuum the database",
		Context: protocol.ContextSnapshot{Space: "system", Route: "/system"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	var prop protocol.CommandProposal
	err = d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		if p, ok := f.Payload.(protocol.ProposalPayload); ok {
			prop = p.Proposal
			return apiclient.ErrStopStream // its commit wrote the event: kill now
		}
		return nil
	})
	if err != nil || prop.ID == "" {
		t.Fatalf("proposal %+v, %v", prop, err)
	}
	d.kill()
	<-d.exited

	rcv.down.Store(false) // the receiver is back; the daemon is not, yet
	restarted := time.Now()
	d2 := startDaemon(t, dataDir, "--public-url", "https://studio.example.com")
	hr := rcv.await(t, d2, "proposal.pending", func(hr hookRequest) bool {
		return hr.event.Type == "proposal.pending" && hr.event.Data["proposalId"] == prop.ID
	})
	t.Logf("the event of the killed daemon arrived %s after the restart began (attempts refused before: %d)",
		time.Since(restarted).Round(time.Millisecond), rcv.refused.Load())
	if !signedBy(secret[1], hr) {
		t.Fatalf("the delivery's signature does not verify: %q", hr.signature)
	}
	if hr.event.Data["conversationId"] != conv.ID || hr.event.Data["risk"] != "admin" {
		t.Fatalf("event data %v", hr.event.Data)
	}

	// The killed turn's proposal was cancelled with it at the restart:
	// nobody decided it, so no proposal.decided. A new one, denied on the
	// new daemon, is decided by the owner.
	conv2, err := d2.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d2.client.SubmitTurn(ctx, conv2.ID, protocol.TurnRequest{Instruction: "vacuum the database",
		Context: protocol.ContextSnapshot{Space: "system", Route: "/system"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	prop2, err := awaitProposal(ctx, d2.client, conv2.ID)
	if err != nil || prop2.ID == "" {
		t.Fatalf("second proposal %+v, %v", prop2, err)
	}
	if _, err := d2.client.Deny(ctx, conv2.ID, prop2.ID); err != nil {
		t.Fatal(err)
	}
	dec := rcv.await(t, d2, "proposal.decided", func(hr hookRequest) bool {
		return hr.event.Type == "proposal.decided" && hr.event.Data["proposalId"] == prop2.ID
	})
	if dec.event.Data["decision"] != "denied" || dec.event.Data["decidedBy"] != "owner" || !signedBy(secret[1], dec) {
		t.Fatalf("decided event %v", dec.event.Data)
	}
	// Every delivery ends delivered (the receiver answers before the
	// daemon records it: wait for the record), each received once.
	var ds []protocol.WebhookDelivery
	testutil.Eventually(t, func() bool {
		ds, err = d2.client.ListDeliveries(ctx, hookID[1])
		if err != nil || len(ds) != 3 { // two pending, one decided
			t.Fatalf("deliveries %+v, %v", ds, err)
		}
		delivered := 0
		for _, dl := range ds {
			if dl.Status == "delivered" {
				delivered++
			}
		}
		return delivered == 3
	}, "the three deliveries delivered")
	for _, dl := range ds {
		if rcv.times(dl.ID) != 1 {
			t.Fatalf("delivery %+v received %d times", dl, rcv.times(dl.ID))
		}
	}
	if out := run(d2.URL, "webhooks", "deliveries", hookID[1]); !strings.Contains(out, hr.id) || !strings.Contains(out, "delivered") {
		t.Fatalf("webhooks deliveries: %s", out)
	}
	if out := run(d2.URL, "webhooks", "remove", hookID[1]); !strings.Contains(out, "removed") {
		t.Fatalf("webhooks remove: %s", out)
	}
}
