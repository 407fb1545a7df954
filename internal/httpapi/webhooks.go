package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/webhooks"
)

// The admin API of webhooks (/api/admin/webhooks): add, list, remove, and
// a webhook's recent deliveries. Changes are audited with the acting
// principal, in the change's transaction; the signing secret is answered
// once, at creation.

// Audit actions of webhook changes.
const (
	ActionWebhookCreated = "studio.webhook.created"
	ActionWebhookRemoved = "studio.webhook.removed"
)

// MaxWebhookURL bounds a webhook's URL.
const MaxWebhookURL = 2048

func (s *Server) webhookRoutes() {
	m, a := s.mux, s.authed
	m.HandleFunc("GET /api/admin/webhooks", a(s.handleListWebhooks))
	m.HandleFunc("POST /api/admin/webhooks", a(s.handleCreateWebhook))
	m.HandleFunc("DELETE /api/admin/webhooks/{id}", a(s.handleRemoveWebhook))
	m.HandleFunc("GET /api/admin/webhooks/{id}/deliveries", a(s.handleListDeliveries))
}

// webhookStore is the webhook store, or the typed refusal when the daemon
// keeps none.
func (s *Server) webhookStore() (store.WebhookStore, error) {
	if s.cfg.Webhooks == nil {
		return nil, protocol.Errorf(protocol.Denied, "this daemon keeps no webhooks")
	}
	return s.cfg.Webhooks, nil
}

// ValidWebhookURL refuses a URL a webhook cannot post to: absolute http
// or https with a host, no credentials, no fragment.
func ValidWebhookURL(raw string) error {
	bad := func(why string) error {
		return protocol.Errorf(protocol.Validation, "url %s", why).With("field", "url")
	}
	if raw == "" || len(raw) > MaxWebhookURL {
		return bad("must be an http or https URL of at most " + strconv.Itoa(MaxWebhookURL) + " bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("does not parse")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("must be http or https, not " + strconv.Quote(u.Scheme))
	case u.Host == "" || u.Hostname() == "":
		return bad("has no host")
	case u.User != nil:
		return bad("must not carry credentials; receivers verify the signature instead")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not have a fragment")
	}
	return nil
}

func webhookView(w store.Webhook) protocol.Webhook {
	events := w.Events
	if events == nil {
		events = []string{}
	}
	return protocol.Webhook{ID: w.ID, URL: w.URL, Events: events, Format: string(w.Format),
		CreatedAt: protocol.Timestamp(w.CreatedAt), CreatedBy: w.CreatedBy}
}

func deliveryView(d store.Delivery) protocol.WebhookDelivery {
	v := protocol.WebhookDelivery{ID: d.ID, Event: d.Event, Status: string(d.Status), Attempts: d.Attempts, LastStatus: d.LastStatus,
		LastError: d.LastError, CreatedAt: protocol.Timestamp(d.CreatedAt), DeliveredAt: stampPtr(d.DeliveredAt)}
	if d.Status == store.DeliveryPending {
		v.NextAttemptAt = stampPtr(&d.NextAttemptAt)
	}
	return v
}

func (s *Server) handleListWebhooks(w http.ResponseWriter, r *http.Request) {
	ws, err := s.webhookStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := ws.ListWebhooks(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]protocol.Webhook, len(list))
	for i, h := range list {
		out[i] = webhookView(h)
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
}

func (s *Server) handleCreateWebhook(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreateWebhookRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, err := s.webhookStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := ValidWebhookURL(req.URL); err != nil {
		s.writeError(w, r, err)
		return
	}
	format := store.WebhookFormat(req.Format)
	if format == "" {
		format = store.FormatStandard
	}
	events := dedupe(req.Events)
	secret, err := webhooks.NewSecret()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	redact.AddKnown(secret, req.URL) // by value from now on: the URL may be the credential
	who, _ := protocol.PrincipalFrom(r.Context())
	id, now := "wh_"+strings.ReplaceAll(uuid.NewString(), "-", ""), s.now()
	h, err := ws.CreateWebhook(r.Context(), store.CreateWebhookParams{ID: id, URL: req.URL, Events: events, Format: format, Secret: secret,
		CreatedBy: who.Name, Now: now,
		// The audit row names the receiver, never its secret.
		Audit: adminAudit(r, ActionWebhookCreated, id, map[string]any{"url": req.URL, "events": events, "format": format}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, protocol.NewWebhook{Webhook: webhookView(h), Secret: secret})
}

// dedupe keeps the first of each value, in order.
func dedupe(vs []string) []string {
	out := make([]string, 0, len(vs))
	seen := make(map[string]bool, len(vs))
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func (s *Server) handleRemoveWebhook(w http.ResponseWriter, r *http.Request) {
	ws, err := s.webhookStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, now := r.PathValue("id"), s.now()
	h, err := ws.RemoveWebhook(r.Context(), store.RemoveWebhookParams{ID: id, Now: now,
		Audit: adminAudit(r, ActionWebhookRemoved, id, map[string]any{}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhook": webhookView(h)})
}

func (s *Server) handleListDeliveries(w http.ResponseWriter, r *http.Request) {
	ws, err := s.webhookStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, protocol.Errorf(protocol.Validation, "limit must be an integer from 1 to 1000").With("field", "limit"))
			return
		}
		limit = n
	}
	list, err := ws.ListDeliveries(r.Context(), store.ListDeliveriesParams{WebhookID: r.PathValue("id"), Limit: limit})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]protocol.WebhookDelivery, len(list))
	for i, d := range list {
		out[i] = deliveryView(d)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": out})
}
