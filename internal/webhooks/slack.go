package webhooks

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/studio/operator/internal/store"
)

// SlackBody is the Slack-compatible body of an event ({"text": ...}, what
// an incoming webhook takes) from its standard payload: one line saying
// what happened, with a link into the cockpit when publicURL is known.
func SlackBody(event string, payload []byte, publicURL string) ([]byte, error) {
	var p struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("slack body of %s: %w", event, err)
	}
	text := SlackText(event, p.Data, publicURL)
	return json.Marshal(map[string]string{"text": text})
}

// SlackText is the message of an event; data is its payload's data.
func SlackText(event string, data map[string]any, publicURL string) string {
	s := func(k string) string { v, _ := data[k].(string); return v }
	var text, link, label string
	switch event {
	case store.EventProposalPending:
		text = fmt.Sprintf("Proposal waiting for confirmation: *%s* (risk %s", esc(s("summary")), esc(s("risk")))
		if s("impact") != "" {
			text += ", " + esc(s("impact"))
		}
		if s("submittedBy") != "" {
			text += ", asked by " + esc(s("submittedBy"))
		}
		text += ")"
		link, label = ProposalLink(publicURL, s("conversationId"), s("proposalId")), "review it in Studio"
	case store.EventProposalDecided:
		by := s("decidedBy")
		if by == "" {
			by = "an operator"
		}
		text = fmt.Sprintf("Proposal %s by %s: *%s*", esc(s("decision")), esc(by), esc(s("summary")))
		link, label = ProposalLink(publicURL, s("conversationId"), s("proposalId")), "open in Studio"
	case store.EventTurnFailed:
		text = "An operator turn failed"
		if s("code") != "" {
			text += " (" + esc(s("code")) + ")"
		}
		if s("message") != "" {
			text += ": " + esc(s("message"))
		}
		link, label = ProposalLink(publicURL, s("conversationId"), ""), "open the conversation in Studio"
	case store.EventRunFailed:
		text = fmt.Sprintf("Run of playbook *%s* failed", esc(s("playbookName")))
		if s("code") != "" {
			text += " (" + esc(s("code")) + ")"
		}
		if s("message") != "" {
			text += ": " + esc(s("message"))
		}
		if publicURL != "" && s("runId") != "" {
			link, label = strings.TrimRight(publicURL, "/")+"/history?tab=runs&run="+url.QueryEscape(s("runId")), "open the run in Studio"
		}
	default:
		text = "Studio event " + esc(event)
	}
	if link != "" {
		text += " <" + link + "|" + label + ">"
	}
	return text
}

// ProposalLink is the cockpit's address that opens the dock on a
// conversation, with its proposal in view when given ("" without a
// public URL). The fragment keeps the ids out of requests and logs.
func ProposalLink(publicURL, conversationID, proposalID string) string {
	if publicURL == "" || conversationID == "" {
		return ""
	}
	q := url.Values{"conversation": {conversationID}}
	if proposalID != "" {
		q.Set("proposal", proposalID)
	}
	return strings.TrimRight(publicURL, "/") + "/#" + q.Encode()
}

// esc escapes what Slack's mrkdwn reads as markup: & < >.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
