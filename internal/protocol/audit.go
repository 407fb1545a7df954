package protocol

import "github.com/go-json-experiment/json/jsontext"

// Audit constants of the operator-command audit row (docs/design.md §10).
const (
	AuditAction = "studio.operator.command"
	AuditActor  = "studio_operator"
)

// Decision is what one audit row records of a proposal (docs/design.md §10).
type Decision string

// Audit decisions: one admin_events row per proposal transition.
const (
	DecisionConfirmed     Decision = "confirmed"
	DecisionDenied        Decision = "denied"
	DecisionExpired       Decision = "expired"
	DecisionExecuted      Decision = "executed"
	DecisionFailed        Decision = "failed"
	DecisionIndeterminate Decision = "indeterminate"
)

// AmendAction is the audit action of the row that links an amended
// proposal to the one that replaced it. The D8 rows keep their
// exact payload: the original's close is decision denied with error_code
// amended, and this second row, in the same transaction, records the link.
const AmendAction = "studio.operator.proposal_amended"

// AmendAudit is the details payload of an AmendAction row.
type AmendAudit struct {
	ConversationID    string `json:"conversation_id"`
	RequestID         string `json:"request_id"`
	ProposalID        string `json:"proposal_id"` // the original
	AmendedBy         string `json:"amended_by"`  // the new proposal
	CommandType       string `json:"command_type"`
	CommandHashBefore string `json:"command_hash_before"`
	CommandHashAfter  string `json:"command_hash_after"`
}

// CommandAudit is exactly the details payload (docs/design.md §10) of an
// admin_events row with action studio.operator.command.
type CommandAudit struct {
	ConversationID string           `json:"conversation_id"`
	RequestID      string           `json:"request_id"`
	ProposalID     string           `json:"proposal_id"`
	CommandType    string           `json:"command_type"`
	CommandHash    string           `json:"command_hash"`
	Target         *ResourceVersion `json:"target"`
	Risk           string           `json:"risk"`
	IdempotencyKey string           `json:"idempotency_key"`
	Decision       Decision         `json:"decision"`
	Result         jsontext.Value   `json:"result"`
	ErrorCode      *string          `json:"error_code"`
	ConfirmedAt    *float64         `json:"confirmed_at"`
	CompletedAt    *float64         `json:"completed_at"`
}
