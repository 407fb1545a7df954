package studio

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

// Validate implements Command.
func (c ReconcileProposalCommand) Validate() error {
	if !isUUID(c.Proposal) {
		return invalid("proposal", "proposal must be a proposal id")
	}
	if c.Outcome != "succeeded" && c.Outcome != "failed" {
		return invalid("outcome", "outcome must be succeeded or failed")
	}
	return CheckText("note", c.Note, 2000, false)
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
	settler := s.settler()
	if settler == nil {
		return Result{}, protocol.Errorf(protocol.ServiceFailure, "proposals cannot be reconciled here: the operator protocol is not running")
	}
	resJSON, err := protocol.Marshal(map[string]any{"reconciled": true, "outcome": c.Outcome, "note": c.Note})
	if err != nil {
		return Result{}, err
	}
	if err := settler.SettleProposal(ctx, Settlement{ProposalID: c.Proposal, Succeeded: c.Outcome == "succeeded",
		Result: resJSON, Actor: env.trigger.actor(), Also: *env.audit(c.Proposal)}); err != nil {
		return Result{}, err
	}
	res := ReconcileResult{ProposalID: c.Proposal, Outcome: c.Outcome, Note: c.Note}
	return Result{Target: resourceVersion(KindOperatorProposal, c.Proposal, 2), Reconciled: &res}, nil
}

// ProposalSettler records the outcome of an operator proposal left
// executing. The coordinator, which owns the proposal lifecycle,
// implements it: reconcile_proposal finishes and audits a proposal with
// the code a confirmed execution finishes with.
type ProposalSettler interface {
	SettleProposal(ctx context.Context, s Settlement) error
}

// Settlement is what reconcile_proposal records: the proposal's outcome,
// the actor of its audit row, and the application's own audit row, which
// commits with it.
type Settlement struct {
	ProposalID string
	Succeeded  bool
	Result     jsontext.Value
	Actor      string
	Also       store.AppendAdminEventParams
}

// SettleProposalsWith wires the settler of reconcile_proposal (the
// coordinator, built after the application).
func (s *Service) SettleProposalsWith(p ProposalSettler) {
	s.mu.Lock()
	s.proposals = p
	s.mu.Unlock()
}

func (s *Service) settler() ProposalSettler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proposals
}
