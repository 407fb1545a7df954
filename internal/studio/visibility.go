package studio

import (
	"context"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The reads that aggregate across conversations — system health's
// indeterminate proposals, the audit trail — show each principal what the
// policy lets it read, whichever door asks (the API, an MCP read tool, a
// turn's tool): a row about another principal's private conversation is
// left out, and a webhook's URL (a Slack incoming webhook's is itself a
// credential) is shown whole only to who may manage webhooks.

// conversationVisible reports whether the request's principal may read
// conversation id; one that no longer exists is decided as a private
// conversation of nobody's (admins only).
func (s *Service) conversationVisible(ctx context.Context, id string) bool {
	if _, ok := protocol.PrincipalFrom(ctx); !ok {
		return true
	}
	r := policy.Conversation{ID: id, Visibility: protocol.VisibilityPrivate}
	if conv, err := s.store.GetConversation(ctx, id); err == nil {
		r = policy.ConversationOf(conv)
	}
	return policy.May(ctx, policy.ReadConversation, r)
}

// auditConversationKeys are the detail keys naming the conversation an
// audit row is about (the operator's rows spell it either way).
var auditConversationKeys = []string{"conversation_id", "conversationId"}

// visibleEvent is e as the request's principal may see it: false when it
// is about a conversation it may not read; a webhook's URL cut to its
// origin unless it may manage webhooks.
func (s *Service) visibleEvent(ctx context.Context, e store.AdminEvent) (store.AdminEvent, bool) {
	if len(e.Details) == 0 {
		return e, true
	}
	var details map[string]any
	if err := protocol.Unmarshal(e.Details, &details); err != nil {
		return e, true
	}
	for _, k := range auditConversationKeys {
		if id, ok := details[k].(string); ok && id != "" && !s.conversationVisible(ctx, id) {
			return e, false
		}
	}
	if u, ok := details["url"].(string); ok && strings.HasPrefix(e.Action, "studio.webhook.") &&
		!policy.May(ctx, policy.ManageWebhooks, policy.Studio{}) {
		details["url"] = urlOrigin(u)
		if b, err := protocol.Marshal(details); err == nil {
			e.Details = jsontext.Value(b)
		}
	}
	return e, true
}

// urlOrigin is a URL's scheme and host, with what followed elided: where
// it points without the secret its path may carry.
func urlOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
