package httpapi

import (
	"net/http"
	"strconv"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

func (s *Server) handleCreateConversation(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreateConversationRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.cfg.Conversations.CreateConversation(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) handleListConversations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.cfg.Conversations.ListConversations(r.Context(), conversations.ListQuery{Status: q.Get("status"), Limit: limit, Cursor: q.Get("cursor"), Q: q.Get("q")})
	answer(w, r, s, list, err)
}

// queryInt parses an optional integer query parameter within bounds.
// maxCursor is the largest after_sequence a read or a stream accepts.
const maxCursor = 1 << 62

func queryInt(v string, def, lo, hi int64, name string) (int64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, protocol.Errorf(protocol.Validation, "%s must be an integer from %d to %d", name, lo, hi).With("field", name)
	}
	return n, nil
}

func (s *Server) handleGetConversation(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := queryInt(q.Get("after_sequence"), 0, 0, maxCursor, "after_sequence")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := queryInt(q.Get("limit"), 200, 1, 1000, "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.cfg.Conversations.Page(r.Context(), r.PathValue("id"), after, int(limit))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) handleUpdateConversation(w http.ResponseWriter, r *http.Request) {
	var req protocol.UpdateConversationRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.cfg.Conversations.UpdateConversation(r.Context(), r.PathValue("id"), req)
	answer(w, r, s, c, err)
}

func (s *Server) handleDeleteConversation(w http.ResponseWriter, r *http.Request) {
	c, err := s.cfg.Conversations.DeleteConversation(r.Context(), r.PathValue("id"))
	answer(w, r, s, c, err)
}

func (s *Server) handleSubmitTurn(w http.ResponseWriter, r *http.Request) {
	var req protocol.TurnRequest
	if err := decodeBody(w, r, maxTurnBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	acc, err := s.cfg.Turns.SubmitTurn(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.turns.Add(1)
	writeJSON(w, http.StatusAccepted, acc)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	// A cancel closes the turn's pending proposals: closing another
	// principal's is denying it, which the policy decides too (before the
	// body is read, as every decision).
	pending, err := s.cfg.Proposals.PendingProposals(r.Context(), r.PathValue("id"), r.PathValue("rid"))
	if err != nil && !protocol.IsCode(err, protocol.NotFound) {
		s.writeError(w, r, err)
		return
	}
	who, _ := protocol.PrincipalFrom(r.Context())
	for _, p := range pending {
		if p.Author != who.Name {
			if err := askProposal(r.Context(), policy.Deny, p); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	// The body says nothing, but it is checked like every other: empty, or
	// a JSON object without members.
	var req struct{}
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.cfg.Turns.CancelTurn(r.Context(), r.PathValue("id"), r.PathValue("rid"))
	answer(w, r, s, t, err)
}

func (s *Server) handleCreateTicket(w http.ResponseWriter, r *http.Request) {
	var req protocol.StreamTicketRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	// A ticket is issued only for a cursor its stream accepts: in range,
	// and not older than the conversation's retained frames.
	if _, err := queryInt(strconv.FormatInt(req.AfterSequence, 10), 0, 0, maxCursor, "afterSequence"); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.askConversation(r.Context(), policy.MintTicket, req.ConversationID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.cfg.Streams.OpenStream(r.Context(), req.ConversationID, req.AfterSequence); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.cfg.Streams.CreateStreamTicket(r.Context(), req, credentialFrom(r.Context()))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (s *Server) handleAckEffect(w http.ResponseWriter, r *http.Request) {
	var req protocol.AckEffectRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.cfg.Effects.AckEffect(r.Context(), r.PathValue("id"), r.PathValue("eid"), req)
	answer(w, r, s, e, err)
}

func (s *Server) handleGetEffect(w http.ResponseWriter, r *http.Request) {
	e, err := s.cfg.Effects.EffectState(r.Context(), r.PathValue("id"), r.PathValue("eid"))
	answer(w, r, s, e, err)
}

func (s *Server) handleRoutes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Catalog.Routes())
}

func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"tools": s.cfg.Catalog.Tools().Specs()})
}
