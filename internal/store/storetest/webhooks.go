package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseWebhooks runs the conformance suite of store.WebhookStore and
// the outbox: each state change that causes an event writes one delivery
// per subscribed, enabled webhook in its own transaction; dispatchers
// claim due deliveries (each by one claimer), and an attempt is recorded
// only under the claim that took it.
func ExerciseWebhooks(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("CreateListRemove", testWebhookCreateListRemove)
	run("Invalid", testWebhookInvalid)
	run("Outbox/Proposals", testOutboxProposals)
	run("Outbox/TurnFailed", testOutboxTurnFailed)
	run("Outbox/RunFailed", testOutboxRunFailed)
	run("Outbox/NothingWithoutTheChange", testOutboxAtomic)
	run("Claim/LeaseEpochAndBackoff", testDeliveryClaim)
	run("Claim/ConcurrentEachOnce", testDeliveryClaimConcurrent)
	run("RemoveFailsPending", testWebhookRemoveFailsPending)
}

func (f *fixture) webhook(format store.WebhookFormat, events ...string) store.Webhook {
	f.t.Helper()
	w, err := f.s.CreateWebhook(f.ctx, store.CreateWebhookParams{ID: newID(), URL: "https://example.com/hook", Events: events,
		Format: format, Secret: "whsec_c2VjcmV0", CreatedBy: "owner", Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreateWebhook: %v", err)
	}
	return w
}

func (f *fixture) deliveries(webhookID string) []store.Delivery {
	f.t.Helper()
	ds, err := f.s.ListDeliveries(f.ctx, store.ListDeliveriesParams{WebhookID: webhookID})
	if err != nil {
		f.t.Fatalf("ListDeliveries: %v", err)
	}
	return ds
}

// body decodes a delivery's standard payload.
func body(t *testing.T, d store.Delivery) (typ string, data map[string]any) {
	t.Helper()
	var b struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(d.Payload, &b); err != nil {
		t.Fatalf("payload %s: %v", d.Payload, err)
	}
	if _, err := time.Parse(time.RFC3339Nano, b.Timestamp); err != nil {
		t.Fatalf("payload timestamp %q: %v", b.Timestamp, err)
	}
	if b.Type != d.Event {
		t.Fatalf("payload type %q, delivery event %q", b.Type, d.Event)
	}
	return b.Type, b.Data
}

func testWebhookCreateListRemove(t *testing.T, f *fixture) {
	now := f.tick()
	id := newID()
	w, err := f.s.CreateWebhook(f.ctx, store.CreateWebhookParams{ID: id, URL: "https://example.com/a", Events: []string{store.EventTurnFailed, store.EventRunFailed},
		Format: store.FormatSlack, Secret: "whsec_abc", CreatedBy: "alice", Now: now, Audit: principalAudit("studio.webhook.created", id, now)})
	if err != nil {
		t.Fatal(err)
	}
	if w.ID != id || w.URL != "https://example.com/a" || len(w.Events) != 2 || w.Events[0] != store.EventTurnFailed ||
		w.Format != store.FormatSlack || w.Secret != "whsec_abc" || w.CreatedBy != "alice" || !w.CreatedAt.Equal(now) || w.DisabledAt != nil {
		t.Fatalf("created %+v", w)
	}
	other := f.webhook(store.FormatStandard, store.EventProposalPending)
	ws, err := f.s.ListWebhooks(f.ctx)
	if err != nil || len(ws) != 2 || ws[0].ID != id || ws[1].ID != other.ID {
		t.Fatalf("ListWebhooks = %+v, %v", ws, err)
	}
	now = f.tick()
	got, err := f.s.RemoveWebhook(f.ctx, store.RemoveWebhookParams{ID: id, Now: now, Audit: principalAudit("studio.webhook.removed", id, now)})
	if err != nil || got.DisabledAt == nil || !got.DisabledAt.Equal(now) {
		t.Fatalf("RemoveWebhook = %+v, %v", got, err)
	}
	if ws, _ := f.s.ListWebhooks(f.ctx); len(ws) != 1 || ws[0].ID != other.ID {
		t.Fatalf("after removal ListWebhooks = %+v", ws)
	}
	if g, err := f.s.GetWebhook(f.ctx, id); err != nil || g.DisabledAt == nil {
		t.Fatalf("GetWebhook of a removed webhook = %+v, %v", g, err)
	}
	_, err = f.s.RemoveWebhook(f.ctx, store.RemoveWebhookParams{ID: id, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.RemoveWebhook(f.ctx, store.RemoveWebhookParams{ID: "nope", Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.ListDeliveries(f.ctx, store.ListDeliveriesParams{WebhookID: "nope"})
	wantCode(t, err, protocol.NotFound)
	if es := f.audits(id); len(es) != 2 || es[0].Action != "studio.webhook.removed" || es[1].Action != "studio.webhook.created" {
		t.Fatalf("audit rows %+v", es)
	}
}

func testWebhookInvalid(t *testing.T, f *fixture) {
	for name, p := range map[string]store.CreateWebhookParams{
		"no events":     {Format: store.FormatStandard},
		"unknown event": {Events: []string{"turn.exploded"}, Format: store.FormatStandard},
		"format":        {Events: []string{store.EventTurnFailed}, Format: "teams"},
	} {
		p.ID, p.URL, p.Secret, p.CreatedBy, p.Now = newID(), "https://example.com", "whsec_x", "owner", f.tick()
		_, err := f.s.CreateWebhook(f.ctx, p)
		if pe := wantCode(t, err, protocol.Validation); pe == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
}

func testOutboxProposals(t *testing.T, f *fixture) {
	hook := f.webhook(store.FormatStandard, store.EventProposalPending, store.EventProposalDecided)
	deaf := f.webhook(store.FormatStandard, store.EventTurnFailed)
	gone := f.webhook(store.FormatStandard, store.WebhookEvents...)
	if _, err := f.s.RemoveWebhook(f.ctx, store.RemoveWebhookParams{ID: gone.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	c, tr := f.running()
	a, b, x := f.propose(c.ID, tr.RequestID), f.propose(c.ID, tr.RequestID), f.propose(c.ID, tr.RequestID)
	ds := f.deliveries(hook.ID)
	if len(ds) != 3 {
		t.Fatalf("%d deliveries after three proposals, want 3", len(ds))
	}
	seen := map[string]bool{}
	for _, d := range ds {
		typ, data := body(t, d)
		if typ != store.EventProposalPending || d.Status != store.DeliveryPending || d.Attempts != 0 || d.WebhookID != hook.ID {
			t.Fatalf("delivery %+v", d)
		}
		if seen[d.ID] {
			t.Fatalf("message id %s twice", d.ID)
		}
		seen[d.ID] = true
		if data["conversationId"] != c.ID || data["risk"] != string(protocol.RiskExecute) || data["summary"] != a.Summary {
			t.Fatalf("pending data %v", data)
		}
	}
	now := f.tick()
	if _, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: a.ID, Now: now, DecidedBy: "bob",
		Audit: proposalAudit(a.ID, protocol.DecisionConfirmed, now)}); err != nil {
		t.Fatal(err)
	}
	denied := string(protocol.Denied)
	now = f.tick()
	if _, _, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: b.ID, Status: store.ProposalCancelled, ErrorCode: &denied,
		Now: now, DecidedBy: "carol", Audit: proposalAudit(b.ID, protocol.DecisionDenied, now)}); err != nil {
		t.Fatal(err)
	}
	// Cancelled with its turn: nobody decided, no event.
	cancelled := string(protocol.Cancelled)
	now = f.tick()
	if _, _, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: x.ID, Status: store.ProposalCancelled, ErrorCode: &cancelled,
		Now: now, Audit: proposalAudit(x.ID, protocol.DecisionDenied, now)}); err != nil {
		t.Fatal(err)
	}
	ds = f.deliveries(hook.ID)
	if len(ds) != 5 {
		t.Fatalf("%d deliveries, want 5 (three pending, one confirmed, one denied)", len(ds))
	}
	decided := map[string]map[string]any{}
	for _, d := range ds {
		if typ, data := body(t, d); typ == store.EventProposalDecided {
			decided[data["proposalId"].(string)] = data
		}
	}
	if d := decided[a.ID]; d == nil || d["decision"] != "confirmed" || d["decidedBy"] != "bob" {
		t.Fatalf("confirmed event %v", d)
	}
	if d := decided[b.ID]; d == nil || d["decision"] != "denied" || d["decidedBy"] != "carol" {
		t.Fatalf("denied event %v", d)
	}
	if len(f.deliveries(deaf.ID)) != 0 || len(f.deliveries(gone.ID)) != 0 {
		t.Fatal("a webhook not subscribed, or removed, got deliveries")
	}
}

func testOutboxTurnFailed(t *testing.T, f *fixture) {
	hook := f.webhook(store.FormatStandard, store.EventTurnFailed)
	_, ok := f.running()
	f.finish(ok.RequestID, store.TurnCompleted, nil)
	if n := len(f.deliveries(hook.ID)); n != 0 {
		t.Fatalf("%d deliveries after a completed turn", n)
	}
	c, bad := f.running()
	f.finish(bad.RequestID, store.TurnFailed, protocol.Errorf(protocol.ModelFailure, "the provider failed"))
	ds := f.deliveries(hook.ID)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries after a failed turn, want 1", len(ds))
	}
	if _, data := body(t, ds[0]); data["requestId"] != bad.RequestID || data["conversationId"] != c.ID ||
		data["code"] != string(protocol.ModelFailure) || data["message"] != "the provider failed" {
		t.Fatalf("turn.failed data %v", data)
	}
	// A restart fails the turns left running: each is an event too.
	_, left := f.running()
	if _, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	ds = f.deliveries(hook.ID)
	if len(ds) != 2 {
		t.Fatalf("%d deliveries after recovery, want 2", len(ds))
	}
	if _, data := body(t, ds[0]); data["requestId"] != left.RequestID || data["code"] != string(protocol.ServiceRestarted) {
		t.Fatalf("recovered turn.failed data %v", data)
	}
}

func testOutboxRunFailed(t *testing.T, f *fixture) {
	hook := f.webhook(store.FormatStandard, store.EventRunFailed)
	pb := f.playbook("audit")
	f.queueRun(pb, store.TriggerManual)
	good := f.claim()
	if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: good.ID, Status: store.RunSucceeded, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	f.queueRun(pb, store.TriggerManual)
	bad := f.claim()
	code, msg := string(protocol.ModelFailure), "the provider failed"
	if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: bad.ID, Status: store.RunFailed, ErrorCode: &code, ErrorMessage: &msg, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	ds := f.deliveries(hook.ID)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1 (the failed run's)", len(ds))
	}
	if _, data := body(t, ds[0]); data["runId"] != bad.ID || data["playbookName"] != "audit" || data["code"] != code || data["message"] != msg {
		t.Fatalf("run.failed data %v", data)
	}
	// Runs a previous process left are failed at start: events too.
	f.queueRun(pb, store.TriggerManual)
	if _, err := f.s.RecoverRuns(f.ctx, store.RecoverRunsParams{ErrorCode: string(protocol.ServiceRestarted), ErrorMessage: "restarted", Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.deliveries(hook.ID)); n != 2 {
		t.Fatalf("%d deliveries after recovery, want 2", n)
	}
}

// testOutboxAtomic: a change refused writes no event.
func testOutboxAtomic(t *testing.T, f *fixture) {
	hook := f.webhook(store.FormatStandard, store.WebhookEvents...)
	c, tr := f.running()
	a := f.propose(c.ID, tr.RequestID)
	f.confirm(a)
	before := len(f.deliveries(hook.ID))
	now := f.tick()
	_, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: a.ID, Now: now, DecidedBy: "bob",
		Audit: proposalAudit(a.ID, protocol.DecisionConfirmed, now)})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.CreateProposal(f.ctx, store.CreateProposalParams{Proposal: f.newProposal(c.ID, "not-the-active-turn"), Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if after := len(f.deliveries(hook.ID)); after != before {
		t.Fatalf("%d deliveries after refused changes, want %d", after, before)
	}
}

func (f *fixture) claimDeliveries(instance string, limit int) []store.ClaimedDelivery {
	f.t.Helper()
	cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimDeliveriesParams{Instance: instance, Now: f.clock.Now(), Lease: time.Minute, Limit: limit})
	if err != nil {
		f.t.Fatalf("ClaimDeliveries: %v", err)
	}
	return cs
}

func testDeliveryClaim(t *testing.T, f *fixture) {
	hook := f.webhook(store.FormatSlack, store.EventTurnFailed)
	_, tr := f.running()
	f.finish(tr.RequestID, store.TurnFailed, protocol.Errorf(protocol.ModelFailure, "x"))
	if oldest, err := f.s.OldestDueDelivery(f.ctx, f.clock.Now()); err != nil || oldest == nil {
		t.Fatalf("OldestDueDelivery = %v, %v", oldest, err)
	}
	cs := f.claimDeliveries("a", 10)
	if len(cs) != 1 || cs[0].URL != hook.URL || cs[0].Secret != hook.Secret || cs[0].Format != store.FormatSlack ||
		cs[0].ClaimedBy != "a" || cs[0].ClaimEpoch != 1 || cs[0].ClaimExpiresAt == nil {
		t.Fatalf("claimed %+v", cs)
	}
	first := cs[0]
	if again := f.claimDeliveries("b", 10); len(again) != 0 {
		t.Fatalf("a claimed delivery was claimed again: %+v", again)
	}
	// The claim expires (its daemon died): another takes it, and the
	// first one's attempt is refused.
	f.clock.Advance(2 * time.Minute)
	cs = f.claimDeliveries("b", 10)
	if len(cs) != 1 || cs[0].ID != first.ID || cs[0].ClaimEpoch != 2 {
		t.Fatalf("after expiry claimed %+v", cs)
	}
	_, err := f.s.RecordDeliveryAttempt(f.ctx, store.RecordDeliveryAttemptParams{ID: first.ID, Instance: "a", Epoch: first.ClaimEpoch,
		Status: store.DeliveryDelivered, HTTPStatus: 200, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	next := f.clock.Now().Add(30 * time.Second)
	d, err := f.s.RecordDeliveryAttempt(f.ctx, store.RecordDeliveryAttemptParams{ID: first.ID, Instance: "b", Epoch: 2,
		Status: store.DeliveryPending, HTTPStatus: 500, Error: "HTTP 500", NextAttemptAt: next, Now: f.tick()})
	if err != nil || d.Status != store.DeliveryPending || d.Attempts != 1 || d.LastStatus != 500 || d.LastError != "HTTP 500" ||
		!d.NextAttemptAt.Equal(next) || d.ClaimedBy != "" {
		t.Fatalf("after a failed attempt %+v, %v", d, err)
	}
	if oldest, _ := f.s.OldestDueDelivery(f.ctx, f.clock.Now()); oldest != nil {
		t.Fatalf("a delivery waiting for its next attempt is due: %v", oldest)
	}
	if cs := f.claimDeliveries("b", 10); len(cs) != 0 {
		t.Fatalf("claimed before its next attempt: %+v", cs)
	}
	f.clock.Advance(time.Minute)
	cs = f.claimDeliveries("b", 10)
	if len(cs) != 1 {
		t.Fatalf("not claimed once due: %+v", cs)
	}
	now := f.tick()
	d, err = f.s.RecordDeliveryAttempt(f.ctx, store.RecordDeliveryAttemptParams{ID: first.ID, Instance: "b", Epoch: cs[0].ClaimEpoch,
		Status: store.DeliveryDelivered, HTTPStatus: 204, Now: now})
	if err != nil || d.Status != store.DeliveryDelivered || d.Attempts != 2 || d.DeliveredAt == nil || !d.DeliveredAt.Equal(now) || d.LastError != "" {
		t.Fatalf("delivered %+v, %v", d, err)
	}
	f.clock.Advance(time.Hour)
	if cs := f.claimDeliveries("b", 10); len(cs) != 0 {
		t.Fatalf("a delivered delivery was claimed: %+v", cs)
	}
}

func testDeliveryClaimConcurrent(t *testing.T, f *fixture) {
	f.webhook(store.FormatStandard, store.EventTurnFailed)
	f.webhook(store.FormatStandard, store.EventTurnFailed)
	const turns = 10
	for range turns {
		_, tr := f.running()
		f.finish(tr.RequestID, store.TurnFailed, nil)
	}
	now := f.tick()
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for _, inst := range []string{"a", "b", "c", "d"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimDeliveriesParams{Instance: inst, Now: now, Lease: time.Minute, Limit: 3})
				if err != nil {
					t.Errorf("ClaimDeliveries(%s): %v", inst, err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					if by, ok := got[c.ID]; ok {
						t.Errorf("delivery %s claimed by %s and %s", c.ID, by, inst)
					}
					got[c.ID] = inst
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 2*turns {
		t.Fatalf("%d deliveries claimed, want %d", len(got), 2*turns)
	}
}

func testWebhookRemoveFailsPending(t *testing.T, f *fixture) {
	hook := f.webhook(store.FormatStandard, store.EventTurnFailed)
	_, tr := f.running()
	f.finish(tr.RequestID, store.TurnFailed, nil)
	cs := f.claimDeliveries("a", 1)
	if len(cs) != 1 {
		t.Fatalf("claimed %+v", cs)
	}
	if _, err := f.s.RemoveWebhook(f.ctx, store.RemoveWebhookParams{ID: hook.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.RecordDeliveryAttempt(f.ctx, store.RecordDeliveryAttemptParams{ID: cs[0].ID, Instance: "a", Epoch: cs[0].ClaimEpoch,
		Status: store.DeliveryDelivered, HTTPStatus: 200, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	ds := f.deliveries(hook.ID)
	if len(ds) != 1 || ds[0].Status != store.DeliveryFailed || ds[0].LastError == "" {
		t.Fatalf("deliveries of a removed webhook %+v", ds)
	}
}
