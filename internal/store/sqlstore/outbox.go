package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// The webhook outbox: an event is written, one delivery per subscribed
// webhook, in the transaction of the state change that causes it. Both
// commit or neither does, so a crash between the change and the
// delivery loses nothing; a dispatcher (internal/webhooks) posts the
// rows afterwards.

// outboxEvent is the standard body of an event: Standard Webhooks'
// {"type", "timestamp", "data"}.
type outboxEvent struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// enqueue writes event to the outbox for every webhook, not disabled,
// that subscribes to it: one INSERT ... SELECT, nothing when none does.
// Each delivery's id (its message id) is the event's random id and the
// webhook's.
func enqueue(ctx context.Context, tx *writeTx, event string, now time.Time, data any) error {
	body, err := protocol.Marshal(outboxEvent{Type: event, Timestamp: now.UTC().Format(time.RFC3339Nano), Data: data})
	if err != nil {
		return fmt.Errorf("outbox %s: %w", event, err)
	}
	// A body goes to a receiver outside: no secret a turn or a run wrote
	// (a summary, an error message) leaves with it.
	body = redact.SecretsJSON(body)
	var b [16]byte
	_, _ = rand.Read(b[:])
	prefix := "msg_" + hex.EncodeToString(b[:]) + "_"
	res, err := tx.ExecContext(ctx, `INSERT INTO studio_webhook_deliveries (id, webhook_id, event_type, payload, status, next_attempt_at, created_at)
		SELECT CAST(? AS TEXT) || id, id, ?, ?, 'pending', ?, ? FROM studio_webhooks
		WHERE disabled_at IS NULL AND events LIKE ?`,
		prefix, event, string(body), ts(now), ts(now), "%,"+event+",%")
	if err != nil {
		return fmt.Errorf("outbox %s: %w", event, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		tx.control(store.DeliveriesQueued) // every daemon's dispatcher may take them
	}
	return nil
}

// proposalEventData is what proposal events carry.
type proposalEventData struct {
	ProposalID     string  `json:"proposalId"`
	ConversationID string  `json:"conversationId"`
	RequestID      string  `json:"requestId"`
	CommandType    string  `json:"commandType"`
	Risk           string  `json:"risk"`
	Impact         string  `json:"impact,omitempty"`
	Summary        string  `json:"summary"`
	TargetName     string  `json:"targetName,omitempty"`
	SubmittedBy    string  `json:"submittedBy,omitempty"`
	ExpiresAt      float64 `json:"expiresAt"`
	Decision       string  `json:"decision,omitempty"`
	DecidedBy      string  `json:"decidedBy,omitempty"`
}

func proposalData(p store.Proposal, decision protocol.Decision) proposalEventData {
	return proposalEventData{ProposalID: p.ID, ConversationID: p.ConversationID, RequestID: p.RequestID, CommandType: p.CommandType,
		Risk: string(p.Risk), Impact: p.Impact, Summary: p.Summary, TargetName: p.TargetName, SubmittedBy: p.SubmittedBy,
		ExpiresAt: ts(p.ExpiresAt), Decision: string(decision), DecidedBy: p.DecidedBy}
}

// enqueueProposal writes a proposal event.
func enqueueProposal(ctx context.Context, tx *writeTx, event string, p store.Proposal, decision protocol.Decision, now time.Time) error {
	return enqueue(ctx, tx, event, now, proposalData(p, decision))
}

// enqueueTurnFailed writes turn.failed for a turn that ended failed.
func enqueueTurnFailed(ctx context.Context, tx *writeTx, t store.Turn, perr *protocol.Error, now time.Time) error {
	data := struct {
		ConversationID string `json:"conversationId"`
		RequestID      string `json:"requestId"`
		Code           string `json:"code,omitempty"`
		Message        string `json:"message,omitempty"`
		SubmittedBy    string `json:"submittedBy,omitempty"`
	}{ConversationID: t.ConversationID, RequestID: t.RequestID, SubmittedBy: t.SubmittedBy}
	if perr != nil {
		data.Code, data.Message = string(perr.Code), perr.Message
	}
	return enqueue(ctx, tx, store.EventTurnFailed, now, data)
}

// enqueueRunFailed writes run.failed for a run that ended failed.
func enqueueRunFailed(ctx context.Context, tx *writeTx, r store.Run, now time.Time) error {
	if r.Status != store.RunFailed {
		return nil
	}
	data := struct {
		RunID        string `json:"runId"`
		PlaybookID   string `json:"playbookId"`
		PlaybookName string `json:"playbookName"`
		Project      string `json:"project,omitempty"`
		Trigger      string `json:"trigger"`
		Code         string `json:"code,omitempty"`
		Message      string `json:"message,omitempty"`
		WorkflowID   string `json:"workflowId,omitempty"`
	}{RunID: r.ID, PlaybookID: r.PlaybookID, PlaybookName: r.PlaybookName, Project: r.Project, Trigger: string(r.Trigger)}
	if r.ErrorCode != nil {
		data.Code = *r.ErrorCode
	}
	if r.ErrorMessage != nil {
		data.Message = *r.ErrorMessage
	}
	if r.WorkflowID != nil {
		data.WorkflowID = *r.WorkflowID
	}
	return enqueue(ctx, tx, store.EventRunFailed, now, data)
}
