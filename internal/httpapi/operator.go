package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func (s *Server) handleCreateConversation(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreateConversationRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.coord.CreateConversation(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, coordinator.ConversationView(c))
}

func (s *Server) handleListConversations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := queryInt(q.Get("limit"), 50, 1, 200, "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := store.ListConversationsParams{Status: store.ConversationStatus(q.Get("status")), Limit: int(limit) + 1}
	if cur := q.Get("cursor"); cur != "" {
		created, id, err := decodeCursor(cur)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		p.AfterCreated, p.AfterID = &created, id
	}
	convs, err := s.coord.ListConversations(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := protocol.ConversationList{Conversations: []protocol.Conversation{}}
	if len(convs) > int(limit) {
		convs = convs[:limit]
		last := convs[len(convs)-1]
		out.NextCursor = encodeCursor(protocol.Timestamp(last.CreatedAt), last.ID)
	}
	for _, c := range convs {
		out.Conversations = append(out.Conversations, coordinator.ConversationView(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// The list cursor is opaque to clients: the last row's created_at and id.
func encodeCursor(created float64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatFloat(created, 'f', -1, 64) + "|" + id))
}

func decodeCursor(s string) (created time.Time, id string, err error) {
	bad := protocol.Errorf(protocol.Validation, "cursor is not valid").With("field", "cursor")
	raw, derr := base64.RawURLEncoding.DecodeString(s)
	if derr != nil {
		return created, "", bad
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	f, perr := strconv.ParseFloat(ts, 64)
	if !ok || perr != nil || id == "" {
		return created, "", bad
	}
	return protocol.Time(f), id, nil
}

// queryInt parses an optional integer query parameter within bounds.
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
	after, err := queryInt(q.Get("after_sequence"), 0, 0, 1<<62, "after_sequence")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := queryInt(q.Get("limit"), 200, 1, 1000, "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.coord.Page(r.Context(), r.PathValue("id"), after, int(limit))
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
	c, err := s.coord.UpdateConversation(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, coordinator.ConversationView(c))
}

func (s *Server) handleDeleteConversation(w http.ResponseWriter, r *http.Request) {
	c, err := s.coord.DeleteConversation(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, coordinator.ConversationView(c))
}

func (s *Server) handleSubmitTurn(w http.ResponseWriter, r *http.Request) {
	var req protocol.TurnRequest
	if err := decodeBody(w, r, maxTurnBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	acc, err := s.coord.SubmitTurn(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.turns.Add(1)
	writeJSON(w, http.StatusAccepted, acc)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	t, err := s.coord.CancelTurn(r.Context(), r.PathValue("id"), r.PathValue("rid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, coordinator.TurnView(t))
}

func (s *Server) handleCreateTicket(w http.ResponseWriter, r *http.Request) {
	var req protocol.StreamTicketRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.coord.CreateStreamTicket(r.Context(), req)
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
	e, err := s.coord.AckEffect(r.Context(), r.PathValue("id"), r.PathValue("eid"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, coordinator.EffectView(e))
}

func (s *Server) handleRoutes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.coord.Routes())
}

func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"tools": s.coord.Tools().Specs()})
}
