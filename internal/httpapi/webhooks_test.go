package httpapi_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// TestWebhooksAdminAPI: an admin adds a webhook (the secret answered
// once), lists it without the secret, reads its deliveries as state
// changes queue them, and removes it; bad URLs, events and formats are
// validation errors; the changes are audited with the admin as actor.
func TestWebhooksAdminAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, serveApp: true})
	ctx := h.ctx()
	created, err := h.client.CreateWebhook(ctx, protocol.CreateWebhookRequest{URL: "https://hooks.example.com/studio",
		Events: []string{store.EventTurnFailed, store.EventProposalPending, store.EventTurnFailed}})
	if err != nil {
		t.Fatal(err)
	}
	w := created.Webhook
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(created.Secret, "whsec_"))
	if !strings.HasPrefix(created.Secret, "whsec_") || err != nil || len(key) != 32 {
		t.Fatalf("secret %q: want whsec_ and base64 of 32 bytes (%v)", created.Secret, err)
	}
	if w.URL != "https://hooks.example.com/studio" || w.Format != "standard" || w.CreatedBy != "owner" ||
		len(w.Events) != 2 || w.Events[0] != store.EventTurnFailed || w.Events[1] != store.EventProposalPending {
		t.Fatalf("created %+v", w)
	}
	list, err := h.client.ListWebhooks(ctx)
	if err != nil || len(list) != 1 || list[0].ID != w.ID {
		t.Fatalf("ListWebhooks = %+v, %v", list, err)
	}
	// The secret is in no later answer and in no audit row.
	for _, path := range []string{"/api/admin/webhooks", "/api/app/audit"} {
		if body := h.getRaw(path); strings.Contains(body, created.Secret) || strings.Contains(body, strings.TrimPrefix(created.Secret, "whsec_")) {
			t.Fatalf("%s shows the secret: %s", path, body)
		}
	}

	// A failed turn queues a delivery, pending, not yet attempted.
	c := h.conversation()
	tr, _, err := h.store.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: c.ID, RequestID: "req-1", Instruction: "x",
		ContextJSON: []byte(`{}`), ContextHash: strings.Repeat("0", 64), Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.store.FinishTurn(ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed,
		Error: protocol.Errorf(protocol.ModelFailure, "x"), Now: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	ds, err := h.client.ListDeliveries(ctx, w.ID)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ListDeliveries = %+v, %v", ds, err)
	}
	if d := ds[0]; d.Event != store.EventTurnFailed || d.Status != "pending" || d.Attempts != 0 || d.NextAttemptAt == nil ||
		d.DeliveredAt != nil || !strings.HasPrefix(d.ID, "msg_") {
		t.Fatalf("delivery %+v", d)
	}

	for name, req := range map[string]protocol.CreateWebhookRequest{
		"ftp":           {URL: "ftp://example.com/x", Events: []string{store.EventTurnFailed}},
		"relative":      {URL: "/hooks", Events: []string{store.EventTurnFailed}},
		"no host":       {URL: "https:///x", Events: []string{store.EventTurnFailed}},
		"credentials":   {URL: "https://u:p@example.com/x", Events: []string{store.EventTurnFailed}},
		"javascript":    {URL: "javascript:alert(1)", Events: []string{store.EventTurnFailed}},
		"unknown event": {URL: "https://example.com", Events: []string{"turn.exploded"}},
		"no events":     {URL: "https://example.com"},
		"format":        {URL: "https://example.com", Events: []string{store.EventTurnFailed}, Format: "teams"},
	} {
		_, err := h.client.CreateWebhook(ctx, req)
		if !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("%s: %v, want validation", name, err)
		}
	}

	removed, err := h.client.RemoveWebhook(ctx, w.ID)
	if err != nil || removed.ID != w.ID {
		t.Fatalf("RemoveWebhook = %+v, %v", removed, err)
	}
	if _, err := h.client.RemoveWebhook(ctx, w.ID); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("removing twice: %v, want not_found", err)
	}
	if list, _ := h.client.ListWebhooks(ctx); len(list) != 0 {
		t.Fatalf("after removal %+v", list)
	}
	if ds, _ := h.client.ListDeliveries(ctx, w.ID); len(ds) != 1 || ds[0].Status != "failed" || ds[0].NextAttemptAt != nil {
		t.Fatalf("deliveries of a removed webhook %+v", ds)
	}
	if _, err := h.client.ListDeliveries(ctx, "wh_nope"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("deliveries of an unknown webhook: %v", err)
	}
	es, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{TargetID: w.ID, Limit: 10})
	if err != nil || len(es) != 2 || es[0].Action != httpapi.ActionWebhookRemoved || es[1].Action != httpapi.ActionWebhookCreated || es[1].Actor != "owner" {
		t.Fatalf("audit %+v, %v", es, err)
	}
}

// getRaw is the body of an owner's GET.
func (h *harness) getRaw(path string) string {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx(), http.MethodGet, h.srv.URL+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return string(b)
}
