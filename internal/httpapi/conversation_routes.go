package httpapi

import (
	"net/http"

	"github.com/studio/operator/internal/protocol"
)

// The conversation endpoints beyond turns and streams: fork, restore, the live view, the model list
// and amending a proposal. Search, pinning and the model choice go through
// the conversation list and PATCH.

func (s *Server) featureRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/operator/conversations/{id}/fork", s.authed(s.handleFork))
	m.HandleFunc("POST /api/operator/conversations/{id}/restore", s.authed(s.handleRestore))
	m.HandleFunc("POST /api/operator/conversations/{id}/view", s.authed(s.handleReportView))
	m.HandleFunc("POST /api/operator/conversations/{id}/proposals/{pid}/amend", s.authed(s.handleAmend))
	m.HandleFunc("GET /api/operator/models", s.authed(s.handleModels))
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req protocol.ForkRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.cfg.Conversations.ForkConversation(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, page)
}

func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.cfg.Conversations.RestoreConversation(r.Context(), r.PathValue("id"))
	answer(w, r, s, c, err)
}

func (s *Server) handleReportView(w http.ResponseWriter, r *http.Request) {
	var req protocol.ViewReport
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.cfg.Conversations.ReportView(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, v)
}

func (s *Server) handleAmend(w http.ResponseWriter, r *http.Request) {
	var req protocol.AmendProposalRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.cfg.Proposals.AmendProposal(r.Context(), r.PathValue("id"), r.PathValue("pid"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Catalog.ListModels(r.Context()))
}
