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
	res, err := s.coord.Confirm(r.Context(), r.PathValue("id"), r.PathValue("pid"), req)
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
	res, err := s.coord.Deny(r.Context(), r.PathValue("id"), r.PathValue("pid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleListProposals(w http.ResponseWriter, r *http.Request) {
	ps, err := s.coord.ListProposals(r.Context(), coordinator.ProposalQuery{ConversationID: r.PathValue("id"), Status: r.URL.Query().Get("status")})
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
		p, err = s.coord.GetProposal(r.Context(), id, r.PathValue("pid"))
	} else {
		p, err = s.coord.FindProposal(r.Context(), r.PathValue("pid"))
	}
	answer(w, r, s, p, err)
}
