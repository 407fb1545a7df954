package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite/sqlitetest"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
	"github.com/studio/operator/internal/webhooks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openSQLite is a fresh, migrated store in a temporary directory.
func openSQLite(t *testing.T) store.Store {
	t.Helper()
	return sqlitetest.Open(t, storetest.Epoch)
}

// received is one request a receiver took.
type received struct {
	id, timestamp, signature string
	body                     []byte
}

// receiver is a webhook endpoint that refuses (500) while refusing is
// set, and records every request it accepts.
type receiver struct {
	srv      *httptest.Server
	refusing atomic.Bool
	refused  atomic.Int64
	mu       sync.Mutex
	got      []received
	arrived  chan struct{} // one send per accepted request, when set
	// hold, when set, runs before a request is answered.
	hold func()
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.hold != nil {
			r.hold()
		}
		if r.refusing.Load() {
			r.refused.Add(1)
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), body})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		if r.arrived != nil {
			r.arrived <- struct{}{}
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) accepted() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// verify is a Standard Webhooks verifier, written from the specification
// and not from the package's Sign: the key is the base64 after whsec_,
// the signed content "<id>.<timestamp>.<body>", the header a
// space-separated list of "v1,<base64 HMAC-SHA256>".
func verify(secret string, r received) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || r.id == "" {
		return false
	}
	if _, err := strconv.ParseInt(r.timestamp, 10, 64); err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.id + "." + r.timestamp + "." + string(r.body)))
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(r.signature) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// events makes state changes that each cause events: failed turns, a
// proposal confirmed, one denied, and a failed run.
type events struct {
	t     *testing.T
	s     store.Store
	clock *storetest.Clock
}

func (e events) now() time.Time { return e.clock.Advance(time.Second) }

// runningTurn is a new conversation with a running turn.
func (e events) runningTurn() (convID, requestID string) {
	e.t.Helper()
	ctx := e.t.Context()
	c, err := e.s.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: e.now()})
	if err != nil {
		e.t.Fatal(err)
	}
	tr, _, err := e.s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: c.ID, RequestID: uuid.NewString(), Instruction: "go",
		ContextJSON: jsontext.Value(`{}`), ContextHash: strings.Repeat("0", 64), Now: e.now(), SubmittedBy: "alice"})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.s.StartTurn(ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: e.now()}); err != nil {
		e.t.Fatal(err)
	}
	return c.ID, tr.RequestID
}

func (e events) failTurn() {
	e.t.Helper()
	_, req := e.runningTurn()
	if _, _, err := e.s.FinishTurn(e.t.Context(), store.FinishTurnParams{RequestID: req, Status: store.TurnFailed,
		Error: protocol.Errorf(protocol.ModelFailure, "the provider failed"), Now: e.now()}); err != nil {
		e.t.Fatal(err)
	}
}

// propose stores a pending proposal in a running turn.
func (e events) propose() store.Proposal {
	e.t.Helper()
	conv, req := e.runningTurn()
	cmd := `{"playbook":"audit-repo"}`
	hash, err := protocol.CommandHash([]byte(cmd))
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.s.CreateProposal(e.t.Context(), store.CreateProposalParams{Now: e.now(), Proposal: store.Proposal{
		ID: uuid.NewString(), ConversationID: conv, RequestID: req, CallID: "call_1", CommandType: "launch_playbook",
		Command: jsontext.Value(cmd), CommandHash: hash, Risk: protocol.RiskExecute, Summary: "Launch audit-repo <now> & then",
		IdempotencyKey: uuid.NewString(), ExpiresAt: e.clock.Now().Add(time.Hour)}})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e events) decide(p store.Proposal, confirm bool) {
	e.t.Helper()
	now := e.now()
	audit := store.AppendAdminEventParams{Actor: "bob", Action: protocol.AuditAction, TargetID: &p.ID, Details: jsontext.Value(`{}`), Now: now}
	var err error
	if confirm {
		_, err = e.s.ConfirmProposal(e.t.Context(), store.ConfirmProposalParams{ID: p.ID, Now: now, DecidedBy: "bob", Audit: audit})
	} else {
		code := string(protocol.Denied)
		_, _, err = e.s.CloseProposal(e.t.Context(), store.CloseProposalParams{ID: p.ID, Status: store.ProposalCancelled, ErrorCode: &code,
			Now: now, DecidedBy: "bob", Audit: audit})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e events) failRun() {
	e.t.Helper()
	ctx := e.t.Context()
	pb, err := e.s.CreatePlaybook(ctx, store.CreatePlaybookParams{ID: uuid.NewString(), Project: "studio", Name: "audit-" + uuid.NewString()[:8],
		Prompt: "audit", Now: e.now()})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.s.CreateRun(ctx, store.CreateRunParams{ID: uuid.NewString(), PlaybookID: pb.ID, Trigger: store.TriggerManual, Now: e.now()}); err != nil {
		e.t.Fatal(err)
	}
	r, ok, err := e.s.ClaimRun(ctx, store.ClaimRunParams{Now: e.now()})
	if err != nil || !ok {
		e.t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	code, msg := string(protocol.ModelFailure), "no model"
	if _, err := e.s.FinishRun(ctx, store.FinishRunParams{ID: r.ID, Status: store.RunFailed, ErrorCode: &code, ErrorMessage: &msg, Now: e.now()}); err != nil {
		e.t.Fatal(err)
	}
}

func addWebhook(t *testing.T, s store.Store, url string, format store.WebhookFormat, clock *storetest.Clock) store.Webhook {
	t.Helper()
	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.CreateWebhook(t.Context(), store.CreateWebhookParams{ID: uuid.NewString(), URL: url, Events: store.WebhookEvents,
		Format: format, Secret: secret, CreatedBy: "owner", Now: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) WebhookAttempt(event, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[event+" "+outcome]++
}

func (o *outcomes) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[k]
}

func deliverDue(t *testing.T, d *webhooks.Dispatcher) int {
	t.Helper()
	n, err := d.DeliverDue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRefusingReceiverGetsEveryEventOnce: a receiver that refuses every
// attempt for a while (the fake clock moves past the backoff) then
// accepts receives every event exactly once per webhook-id, each signed
// so that an independent Standard Webhooks verifier accepts it.
func TestRefusingReceiverGetsEveryEventOnce(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	clock := storetest.NewClock(storetest.Epoch)
	rcv := newReceiver(t)
	rcv.refusing.Store(true)
	hook := addWebhook(t, s, rcv.srv.URL, store.FormatStandard, clock)
	ev := events{t, s, clock}
	ev.failTurn()
	ev.failTurn()
	p, q := ev.propose(), ev.propose()
	ev.decide(p, true)
	ev.decide(q, false)
	ev.failRun()
	const want = 7 // two turns, two pending, two decided, one run
	obs := &outcomes{}
	d := webhooks.New(webhooks.Config{Store: s, Instance: "a", Client: rcv.srv.Client(), Now: clock.Now,
		Rand: func() float64 { return 0.5 }, Observer: obs})

	// Refused for a minute and a half of (fake) time: each attempt comes
	// after its backoff, not before.
	if n := deliverDue(t, d); n != want || rcv.refused.Load() != want {
		t.Fatalf("first round: %d attempts, %d refused; want %d", n, rcv.refused.Load(), want)
	}
	if n := deliverDue(t, d); n != 0 {
		t.Fatalf("%d attempts before the backoff passed", n)
	}
	clock.Advance(10 * time.Second) // the first backoff: 5 to 10 s
	if n := deliverDue(t, d); n != want {
		t.Fatalf("second round: %d attempts, want %d", n, want)
	}
	clock.Advance(80 * time.Second)
	deliverDue(t, d)
	if got := rcv.refused.Load(); got != 3*want {
		t.Fatalf("%d refusals, want %d", got, 3*want)
	}
	ds, err := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{WebhookID: hook.ID})
	if err != nil || len(ds) != want {
		t.Fatalf("ListDeliveries = %d, %v", len(ds), err)
	}
	for _, dl := range ds {
		if dl.Status != store.DeliveryPending || dl.Attempts != 3 || dl.LastStatus != 500 || dl.LastError != "HTTP 500" {
			t.Fatalf("refused delivery %+v", dl)
		}
	}

	// Back up: everything arrives, once.
	rcv.refusing.Store(false)
	clock.Advance(time.Minute)
	if n := deliverDue(t, d); n != want {
		t.Fatalf("after recovery %d attempts, want %d", n, want)
	}
	clock.Advance(48 * time.Hour)
	if n := deliverDue(t, d); n != 0 {
		t.Fatalf("%d attempts after every delivery arrived", n)
	}
	got := rcv.accepted()
	ids := map[string]int{}
	types := map[string]int{}
	for _, r := range got {
		ids[r.id]++
		if !verify(hook.Secret, r) {
			t.Fatalf("the verifier refused delivery %s: signature %q", r.id, r.signature)
		}
		tampered := r
		tampered.body = append([]byte(nil), r.body...)
		tampered.body[len(tampered.body)-2] ^= 1
		if verify(hook.Secret, tampered) {
			t.Fatalf("the verifier accepted a tampered body of %s", r.id)
		}
		other := r
		other.id = "msg_other"
		if verify(hook.Secret, other) {
			t.Fatal("the verifier accepted another message id")
		}
		var b struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		types[b.Type]++
	}
	if len(got) != want || len(ids) != want {
		t.Fatalf("received %d requests with %d ids, want %d each once", len(got), len(ids), want)
	}
	for _, dl := range ds {
		if ids[dl.ID] != 1 {
			t.Fatalf("delivery %s received %d times", dl.ID, ids[dl.ID])
		}
	}
	if types[store.EventTurnFailed] != 2 || types[store.EventProposalPending] != 2 || types[store.EventProposalDecided] != 2 || types[store.EventRunFailed] != 1 {
		t.Fatalf("events received %v", types)
	}
	ds, _ = s.ListDeliveries(t.Context(), store.ListDeliveriesParams{WebhookID: hook.ID})
	for _, dl := range ds {
		if dl.Status != store.DeliveryDelivered || dl.Attempts != 4 || dl.LastStatus != 204 || dl.DeliveredAt == nil {
			t.Fatalf("delivered %+v", dl)
		}
	}
	if obs.get(store.EventTurnFailed+" retry") != 6 || obs.get(store.EventTurnFailed+" delivered") != 2 {
		t.Fatalf("outcomes %v", obs.n)
	}
}

// TestGivesUpAfterTheDeadline: a receiver that never accepts gets no
// attempt past GiveUpAfter; the delivery fails.
func TestGivesUpAfterTheDeadline(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	clock := storetest.NewClock(storetest.Epoch)
	rcv := newReceiver(t)
	rcv.refusing.Store(true)
	hook := addWebhook(t, s, rcv.srv.URL, store.FormatStandard, clock)
	events{t, s, clock}.failTurn()
	obs := &outcomes{}
	d := webhooks.New(webhooks.Config{Store: s, Instance: "a", Client: rcv.srv.Client(), Now: clock.Now, Rand: func() float64 { return 0.99 },
		Backoff: webhooks.Backoff{First: time.Second, Max: 10 * time.Second, GiveUpAfter: time.Minute}, Observer: obs})
	for range 100 {
		deliverDue(t, d)
		clock.Advance(10 * time.Second)
	}
	ds, _ := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{WebhookID: hook.ID})
	if len(ds) != 1 || ds[0].Status != store.DeliveryFailed || ds[0].Attempts < 5 || ds[0].Attempts > 12 {
		t.Fatalf("delivery %+v", ds)
	}
	if obs.get(store.EventTurnFailed+" failed") != 1 || int(rcv.refused.Load()) != ds[0].Attempts {
		t.Fatalf("outcomes %v, %d refusals", obs.n, rcv.refused.Load())
	}
}

func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	b := webhooks.DefaultBackoff
	for attempts, step := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 8: 1280 * time.Second, 10: 5120 * time.Second, 11: 2 * time.Hour, 40: 2 * time.Hour} {
		if lo, hi := b.Delay(attempts, 0), b.Delay(attempts, 0.999999); lo != step/2 || hi <= lo || hi > step {
			t.Errorf("attempt %d: delay in [%s, %s], want [%s, %s]", attempts, lo, hi, step/2, step)
		}
	}
	// The whole schedule: about a day, whatever the jitter.
	for _, r := range []float64{0, 0.5, 0.999999} {
		created := storetest.Epoch
		now, attempts := created, 1
		for {
			next, ok := b.Next(created, now, attempts, r)
			if !ok {
				break
			}
			if !next.After(now) {
				t.Fatalf("r=%v: attempt %d not after the previous", r, attempts)
			}
			now = next
			attempts++
		}
		if life := now.Sub(created); life < 22*time.Hour || life > 24*time.Hour {
			t.Errorf("r=%v: last attempt %s after the event, want about a day", r, life)
		}
		if attempts < 15 || attempts > 40 {
			t.Errorf("r=%v: %d attempts in a day", r, attempts)
		}
	}
}

// TestSlackFormat: a slack webhook gets {"text": ...} with the link into
// the cockpit, escaped, and signed like any other.
func TestSlackFormat(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	clock := storetest.NewClock(storetest.Epoch)
	rcv := newReceiver(t)
	hook := addWebhook(t, s, rcv.srv.URL, store.FormatSlack, clock)
	ev := events{t, s, clock}
	p := ev.propose()
	ev.failRun()
	d := webhooks.New(webhooks.Config{Store: s, Instance: "a", Client: rcv.srv.Client(), Now: clock.Now, PublicURL: "https://studio.example.com/"})
	if n := deliverDue(t, d); n != 2 {
		t.Fatalf("%d attempts", n)
	}
	texts := map[string]bool{}
	for _, r := range rcv.accepted() {
		if !verify(hook.Secret, r) {
			t.Fatal("slack body not signed")
		}
		var b map[string]any
		if err := json.Unmarshal(r.body, &b); err != nil || len(b) != 1 {
			t.Fatalf("slack body %s: %v", r.body, err)
		}
		texts[b["text"].(string)] = true
	}
	link := "<https://studio.example.com/#conversation=" + p.ConversationID + "&proposal=" + p.ID + "|review it in Studio>"
	wantPending := "Proposal waiting for confirmation: *Launch audit-repo &lt;now&gt; &amp; then* (risk execute, asked by alice) " + link
	if !texts[wantPending] {
		t.Fatalf("texts %v, want %q", texts, wantPending)
	}
	var run string
	for tx := range texts {
		if strings.HasPrefix(tx, "Run of playbook") {
			run = tx
		}
	}
	if !strings.Contains(run, "failed (model_failure): no model <https://studio.example.com/history?tab=runs&run=") {
		t.Fatalf("run text %q", run)
	}
}

// TestRunWakesOnCommit: the dispatcher's loop posts a delivery when its
// commit lands, not at its next poll, and stops with its context.
func TestRunWakesOnCommit(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	clock := storetest.NewClock(storetest.Epoch)
	rcv := newReceiver(t)
	rcv.arrived = make(chan struct{}, 1)
	addWebhook(t, s, rcv.srv.URL, store.FormatStandard, clock)
	d := webhooks.New(webhooks.Config{Store: s, Instance: "a", Client: rcv.srv.Client(), Now: clock.Now, Poll: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	events{t, s, clock}.failTurn()
	select {
	case <-rcv.arrived:
	case <-time.After(testutil.Patience):
		t.Fatal("no delivery while the poll interval is an hour")
	}
	cancel()
	<-done
}

// TestTimeoutIsARetry: a receiver that does not answer within the
// timeout counts as a refusal, tried again later.
func TestTimeoutIsARetry(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	clock := storetest.NewClock(storetest.Epoch)
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	hook := addWebhook(t, s, srv.URL, store.FormatStandard, clock)
	events{t, s, clock}.failTurn()
	d := webhooks.New(webhooks.Config{Store: s, Instance: "a", Client: srv.Client(), Now: clock.Now, Timeout: 50 * time.Millisecond})
	deliverDue(t, d)
	ds, _ := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{WebhookID: hook.ID})
	if len(ds) != 1 || ds[0].Status != store.DeliveryPending || ds[0].Attempts != 1 || ds[0].LastStatus != 0 || !strings.Contains(ds[0].LastError, "no answer") {
		t.Fatalf("delivery %+v", ds)
	}
}

// heldUp is a Store whose first claim that takes a delivery runs then
// before the dispatcher gets it: the dispatcher held up (paused) between
// its claim and its post.
type heldUp struct {
	store.Store
	once sync.Once
	then func()
}

func (h *heldUp) ClaimDeliveries(ctx context.Context, p store.ClaimDeliveriesParams) ([]store.ClaimedDelivery, error) {
	cs, err := h.Store.ClaimDeliveries(ctx, p)
	if len(cs) > 0 {
		h.once.Do(h.then)
	}
	return cs, err
}

// TestHeldUpDispatcherDoesNotPostAfterItsClaim: a dispatcher held up
// between its claim and its post until its claim expired, while another
// dispatcher claimed the delivery and delivered it, does not post it
// again when it goes on: the receiver gets it once.
func TestHeldUpDispatcherDoesNotPostAfterItsClaim(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	clock := storetest.NewClock(storetest.Epoch)
	rcv := newReceiver(t)
	hook := addWebhook(t, s, rcv.srv.URL, store.FormatStandard, clock)
	events{t, s, clock}.failTurn()
	const lease = 10 * time.Second
	b := webhooks.New(webhooks.Config{Store: s, Instance: "b", Client: rcv.srv.Client(), Now: clock.Now, Lease: lease, Timeout: time.Second})
	a := webhooks.New(webhooks.Config{Store: &heldUp{Store: s, then: func() {
		clock.Advance(lease + time.Second) // a's claim expires while it is held up
		if n := deliverDue(t, b); n != 1 {
			t.Errorf("the other dispatcher made %d attempts, want 1", n)
		}
	}}, Instance: "a", Client: rcv.srv.Client(), Now: clock.Now, Lease: lease, Timeout: time.Second})
	deliverDue(t, a)
	got := rcv.accepted()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d posts, want the delivery once", len(got))
	}
	ds, err := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{WebhookID: hook.ID})
	if err != nil || len(ds) != 1 || ds[0].Status != store.DeliveryDelivered || ds[0].Attempts != 1 || ds[0].ClaimEpoch != 2 {
		t.Fatalf("deliveries %+v, %v; want one, delivered in one attempt under the second claim", ds, err)
	}
}
