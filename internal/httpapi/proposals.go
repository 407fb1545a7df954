package httpapi

import (
	"net/http"
	"strings"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
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

// proposalStatuses parses ?status=pending,executing.
func proposalStatuses(v string) ([]store.ProposalStatus, error) {
	if v == "" {
		return nil, nil
	}
	var out []store.ProposalStatus
	for _, part := range strings.Split(v, ",") {
		st := store.ProposalStatus(part)
		switch st {
		case store.ProposalPending, store.ProposalExecuting, store.ProposalSucceeded, store.ProposalFailed,
			store.ProposalExpired, store.ProposalCancelled, store.ProposalConflict:
			out = append(out, st)
		default:
			return nil, protocol.Errorf(protocol.Validation, "unknown proposal status %q", part).With("field", "status")
		}
	}
	return out, nil
}

func (s *Server) handleListProposals(w http.ResponseWriter, r *http.Request) {
	statuses, err := proposalStatuses(r.URL.Query().Get("status"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.coord.ListProposals(r.Context(), r.PathValue("id"), statuses)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]protocol.ProposalState, 0, len(ps))
	for _, p := range ps {
		out = append(out, coordinator.ProposalView(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"proposals": out})
}

func (s *Server) handleGetProposal(w http.ResponseWriter, r *http.Request) {
	var p store.Proposal
	var err error
	if id := r.PathValue("id"); id != "" {
		p, err = s.coord.GetProposal(r.Context(), id, r.PathValue("pid"))
	} else {
		p, err = s.coord.FindProposal(r.Context(), r.PathValue("pid"))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, coordinator.ProposalView(p))
}
