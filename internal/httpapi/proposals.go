package httpapi

import (
	"net/http"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
)

func (s *Server) handleConfirm(w http.ResponseWriter, r *http.Request) {
	var req protocol.ConfirmProposalRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Proposals.Confirm(r.Context(), r.PathValue("id"), r.PathValue("pid"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleDeny(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Proposals.Deny(r.Context(), r.PathValue("id"), r.PathValue("pid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleListProposals lists proposals, newest first; ?decidable=true keeps
// the pending ones the caller may confirm (the policy's confirm): what
// waits for them.
func (s *Server) handleListProposals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	decidable := false
	switch v := q.Get("decidable"); v {
	case "", "false":
	case "true":
		decidable = true
	default:
		s.writeError(w, r, protocol.Errorf(protocol.Validation, "decidable must be true or false, not %q", v).With("field", "decidable"))
		return
	}
	ps, err := s.cfg.Proposals.ListProposals(r.Context(), coordinator.ProposalQuery{ConversationID: r.PathValue("id"), Status: q.Get("status"), Decidable: decidable})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"proposals": ps})
}

func (s *Server) handleGetProposal(w http.ResponseWriter, r *http.Request) {
	var p protocol.ProposalState
	var err error
	if id := r.PathValue("id"); id != "" {
		p, err = s.cfg.Proposals.GetProposal(r.Context(), id, r.PathValue("pid"))
	} else {
		p, err = s.cfg.Proposals.FindProposal(r.Context(), r.PathValue("pid"))
	}
	answer(w, r, s, p, err)
}
