package httpapi

import (
	"net/http"
	"slices"

	"github.com/studio/operator/internal/protocol"
)

// mayConfirm is the confirm's check of who confirms: the role the
// proposal's risk needs (protocol.ConfirmRole), and four-eyes — a proposal
// whose risk or impact is in Config.SecondApproverFor cannot be confirmed
// by the principal whose turn produced it. Risk, impact and submitter
// never change after a proposal is stored, so reading them first races
// nothing. A missing proposal is left to Confirm (not_found).
func (s *Server) mayConfirm(r *http.Request) error {
	who, _ := protocol.PrincipalFrom(r.Context())
	p, err := s.coord.GetProposal(r.Context(), r.PathValue("id"), r.PathValue("pid"))
	if err != nil {
		return nil
	}
	return s.confirmDecision(who, p)
}

// confirmDecision is the one decision of whether who may confirm p: the
// confirm asks it, and so does the list of proposals waiting for the
// caller (?decidable=true).
func (s *Server) confirmDecision(who protocol.Principal, p protocol.ProposalState) error {
	if err := requireRole(who, protocol.ConfirmRole(p.Risk)); err != nil {
		return err
	}
	if p.Status == "pending" && p.SubmittedBy != "" && p.SubmittedBy == who.Name && s.needsSecondApprover(p.Risk, p.Impact) {
		return protocol.SecondApproverDenied(p.Risk)
	}
	return nil
}

// needsSecondApprover reports whether a proposal of the risk or impact
// needs a principal other than its turn's to confirm it.
func (s *Server) needsSecondApprover(risk, impact string) bool {
	return slices.Contains(s.cfg.SecondApproverFor, risk) || (impact != "" && slices.Contains(s.cfg.SecondApproverFor, impact))
}

// SecondApproverValues are what --second-approver-for accepts: risks and
// impacts.
var SecondApproverValues = []string{protocol.RiskMutate, protocol.RiskExecute, protocol.RiskAdmin,
	protocol.ImpactDestructive, protocol.ImpactIrreversible}
