package protocol

import "github.com/go-json-experiment/json/jsontext"

// Audit constants of ADR D8.
const (
	AuditAction = "studio.operator.command"
	AuditActor  = "studio_operator"
)

// Audit decisions: one admin_events row per proposal transition.
const (
	DecisionConfirmed     = "confirmed"
	DecisionDenied        = "denied"
	DecisionExpired       = "expired"
	DecisionExecuted      = "executed"
	DecisionFailed        = "failed"
	DecisionIndeterminate = "indeterminate"
)

// CommandAudit is exactly the ADR D8 details payload of an admin_events row
// with action studio.operator.command.
type CommandAudit struct {
	ConversationID string           `json:"conversation_id"`
	RequestID      string           `json:"request_id"`
	ProposalID     string           `json:"proposal_id"`
	CommandType    string           `json:"command_type"`
	CommandHash    string           `json:"command_hash"`
	Target         *ResourceVersion `json:"target"`
	Risk           string           `json:"risk"`
	IdempotencyKey string           `json:"idempotency_key"`
	Decision       string           `json:"decision"`
	Result         jsontext.Value   `json:"result"`
	ErrorCode      *string          `json:"error_code"`
	ConfirmedAt    *float64         `json:"confirmed_at"`
	CompletedAt    *float64         `json:"completed_at"`
}
