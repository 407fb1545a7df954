package app

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// KindOperatorProposal is the target kind of reconcile_proposal.
const KindOperatorProposal = "operator_proposal"

// ReconcileProposalCommand is reconcile_proposal: an admin records what
// really happened to an operator proposal left executing (indeterminate)
// because its result could not be recorded. Nothing is executed again; the
// proposal gets its final status and audit row.
type ReconcileProposalCommand struct {
	Proposal string `json:"proposal" jsonschema:"minLength=36,maxLength=36" jsonschema_description:"The id of the proposal left executing (doctor lists them)."`
	Outcome  string `json:"outcome" jsonschema:"enum=succeeded,enum=failed" jsonschema_description:"What the operator determined: the command took effect (succeeded) or did not (failed)."`
	Note     string `json:"note,omitempty" jsonschema:"maxLength=2000" jsonschema_description:"How it was determined, for the audit trail."`
}

// ReconcileResult is what reconcile_proposal recorded.
type ReconcileResult struct {
	ProposalID string `json:"proposalId"`
	Outcome    string `json:"outcome"`
	Note       string `json:"note,omitempty"`
}

// Type implements Command.
func (ReconcileProposalCommand) Type() string { return "reconcile_proposal" }

// Risk implements Command.
func (ReconcileProposalCommand) Risk() string { return protocol.RiskAdmin }

// Validate implements Command.
func (c ReconcileProposalCommand) Validate() error {
	if !isUUID(c.Proposal) {
		return invalid("proposal", "proposal must be a proposal id")
	}
	if c.Outcome != "succeeded" && c.Outcome != "failed" {
		return invalid("outcome", "outcome must be succeeded or failed")
	}
	return checkText("note", c.Note, 2000, false)
}

// Summary implements Command.
func (c ReconcileProposalCommand) Summary() string {
	s := fmt.Sprintf("Record that indeterminate proposal %s %s", c.Proposal, c.Outcome)
	if c.Note != "" {
		s += ": " + quote(c.Note)
	}
	return s
}

// resolve names the proposal; it is a valid target only while executing.
func (c ReconcileProposalCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	p, err := s.store.GetProposal(ctx, c.Proposal)
	if err != nil {
		return nil, err
	}
	if p.Status != store.ProposalExecuting {
		return nil, protocol.Errorf(protocol.Conflict, "proposal %s is %s, not indeterminate; there is nothing to reconcile", p.ID, p.Status).
			With("status", string(p.Status))
	}
	return resourceVersion(KindOperatorProposal, p.ID, 1), nil
}

func (c ReconcileProposalCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	p, err := s.store.GetProposal(ctx, c.Proposal)
	if err != nil {
		return Result{}, err
	}
	status, decision := store.ProposalSucceeded, protocol.DecisionExecuted
	var code *string
	if c.Outcome == "failed" {
		status, decision = store.ProposalFailed, protocol.DecisionFailed
		failed := "reconciled_failed"
		code = &failed
	}
	res := ReconcileResult{ProposalID: p.ID, Outcome: c.Outcome, Note: c.Note}
	resJSON, err := protocol.Marshal(map[string]any{"reconciled": true, "outcome": c.Outcome, "note": c.Note})
	if err != nil {
		return Result{}, err
	}
	completed := protocol.Timestamp(env.now)
	d := protocol.CommandAudit{ConversationID: p.ConversationID, RequestID: p.RequestID, ProposalID: p.ID, CommandType: p.CommandType,
		CommandHash: p.CommandHash, Target: p.Target, Risk: p.Risk, IdempotencyKey: p.IdempotencyKey, Decision: decision,
		Result: jsontext.Value(resJSON), ErrorCode: code, CompletedAt: &completed}
	if p.ConfirmedAt != nil {
		f := protocol.Timestamp(*p.ConfirmedAt)
		d.ConfirmedAt = &f
	}
	details, err := protocol.Marshal(d)
	if err != nil {
		return Result{}, err
	}
	id := p.ID
	if _, _, err := s.store.FinishProposal(ctx, store.FinishProposalParams{ID: p.ID, Status: status, Result: resJSON, ErrorCode: code,
		Now: env.now, Audit: store.AppendAdminEventParams{Actor: env.trigger.actor(), Action: protocol.AuditAction, TargetID: &id,
			Details: details, Now: env.now}, Also: env.audit(p.ID)}); err != nil {
		return Result{}, err
	}
	return Result{Target: resourceVersion(KindOperatorProposal, p.ID, 2), Reconciled: &res}, nil
}
