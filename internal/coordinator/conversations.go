package coordinator

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/paging"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// conversation returns a visible conversation: deleted is not_found
// everywhere, and so is one the request's principal may not see (another
// principal's private conversation), with the same answer as a missing
// one: its existence does not leak.
func (c *Coordinator) conversation(ctx context.Context, id string) (store.Conversation, error) {
	conv, err := c.anyConversation(ctx, id)
	if err != nil {
		return conv, err
	}
	if conv.Status == store.ConversationDeleted {
		return conv, conversationNotFound(id)
	}
	return conv, nil
}

// anyConversation is a conversation of any status that the request's
// principal may see; not_found otherwise.
func (c *Coordinator) anyConversation(ctx context.Context, id string) (store.Conversation, error) {
	if _, err := uuid.Parse(id); err != nil {
		return store.Conversation{}, conversationNotFound(id)
	}
	conv, err := c.store.GetConversation(ctx, id)
	if err != nil {
		return conv, err
	}
	if !visible(ctx, conv) {
		return store.Conversation{}, conversationNotFound(id)
	}
	return conv, nil
}

func conversationNotFound(id string) error {
	return protocol.Errorf(protocol.NotFound, "conversation %s not found", id)
}

// visible reports whether the request's principal may see conv. Work
// without a principal is the daemon's own (recovery, the sweeper) and
// sees everything.
func visible(ctx context.Context, conv store.Conversation) bool {
	p, ok := protocol.PrincipalFrom(ctx)
	return !ok || conv.VisibleTo(p.Name, p.Role)
}

// visibleTo is the listings' filter of the request's principal: its name,
// or "" for an admin or the daemon's own work (everything).
func visibleTo(ctx context.Context) string {
	p, ok := protocol.PrincipalFrom(ctx)
	if !ok || p.Role == protocol.RoleAdmin {
		return ""
	}
	return p.Name
}

// ofConversation reads a record (a turn, a proposal, an effect) by id and
// returns it only if it belongs to the visible conversation convID:
// anything else is not_found, as if it did not exist.
func ofConversation[T any](ctx context.Context, c *Coordinator, convID, what, id string,
	get func(context.Context, string) (T, error), owner func(T) string) (T, error) {
	var zero T
	if _, err := c.conversation(ctx, convID); err != nil {
		return zero, err
	}
	notFound := protocol.Errorf(protocol.NotFound, "%s %s not found", what, id)
	if _, err := uuid.Parse(id); err != nil {
		return zero, notFound
	}
	v, err := get(ctx, id)
	if err != nil {
		return zero, err
	}
	if owner(v) != convID {
		return zero, notFound
	}
	return v, nil
}

// CreateConversation creates an active conversation.
func (c *Coordinator) CreateConversation(ctx context.Context, req protocol.CreateConversationRequest) (protocol.Conversation, error) {
	if err := validTitle(req.Title); err != nil {
		return protocol.Conversation{}, err
	}
	if req.Project != nil && (len(*req.Project) == 0 || len(*req.Project) > 200) {
		return protocol.Conversation{}, protocol.Errorf(protocol.Validation, "project must be 1 to 200 characters").With("field", "project")
	}
	visibility := protocol.VisibilityTeam
	if req.Visibility != nil {
		v, err := protocol.ParseVisibility(*req.Visibility)
		if err != nil {
			return protocol.Conversation{}, err
		}
		visibility = v
	}
	conv, err := c.store.CreateConversation(ctx, store.CreateConversationParams{
		ID: uuid.NewString(), Project: req.Project, Title: req.Title, Owner: principalName(ctx), Visibility: visibility, Now: c.now(),
	})
	return conversationView(conv), err
}

func validTitle(t *string) error {
	if t != nil && len([]rune(*t)) > 200 {
		return protocol.Errorf(protocol.Validation, "title must be at most 200 characters").With("field", "title")
	}
	return nil
}

// ConversationQuery pages conversations, pinned first, then newest first:
// Status is "", active, archived or deleted (those still recoverable); Q
// searches titles and turn text; Cursor is a previous page's NextCursor.
type ConversationQuery struct {
	Status string
	Limit  int
	Cursor string
	Q      string
}

// ListConversations pages conversations newest first.
func (c *Coordinator) ListConversations(ctx context.Context, q ConversationQuery) (protocol.ConversationList, error) {
	status := store.ConversationStatus(q.Status)
	switch status {
	case "", store.ConversationActive, store.ConversationArchived, store.ConversationDeleted:
	default:
		return protocol.ConversationList{}, protocol.Errorf(protocol.Validation, "status must be active, archived or deleted").With("field", "status")
	}
	terms, err := searchTerms(q.Q)
	if err != nil {
		return protocol.ConversationList{}, err
	}
	limit, err := paging.Limit(q.Limit)
	if err != nil {
		return protocol.ConversationList{}, err
	}
	cur, err := paging.Decode(q.Cursor, "conversations")
	if err != nil {
		return protocol.ConversationList{}, err
	}
	p := store.ListConversationsParams{Status: status, Limit: limit + 1, Terms: terms, VisibleTo: visibleTo(ctx)}
	if status == store.ConversationDeleted {
		since := c.now().Add(-c.cfg.RecoveryWindow)
		p.DeletedAfter = &since
	}
	if q.Q != "" && len(terms) == 0 { // nothing searchable: nothing matches
		return protocol.ConversationList{Conversations: []protocol.Conversation{}}, nil
	}
	if q.Cursor != "" {
		at := protocol.Time(cur.At)
		p.AfterPinned, p.AfterCreated, p.AfterID = cur.Seq == 1, &at, cur.ID
	}
	rows, err := c.store.ListConversations(ctx, p)
	if err != nil {
		return protocol.ConversationList{}, err
	}
	var out protocol.ConversationList
	out.Conversations, out.NextCursor = paging.Cut(rows, limit, conversationView, func(conv store.Conversation) paging.Cursor {
		cur := paging.Cursor{List: "conversations", At: protocol.Timestamp(conv.CreatedAt), ID: conv.ID}
		if conv.Pinned {
			cur.Seq = 1
		}
		return cur
	})
	return out, nil
}

// UpdateConversation renames, archives or unarchives a conversation. An
// archived conversation is read-only: it takes a new title only when the
// same request unarchives it.
func (c *Coordinator) UpdateConversation(ctx context.Context, id string, req protocol.UpdateConversationRequest) (protocol.Conversation, error) {
	cur, err := c.conversation(ctx, id)
	if err != nil {
		return protocol.Conversation{}, err
	}
	if req.Visibility != nil {
		if _, err := protocol.ParseVisibility(*req.Visibility); err != nil {
			return protocol.Conversation{}, err
		}
		if who, ok := protocol.PrincipalFrom(ctx); ok && who.Role != protocol.RoleAdmin && who.Name != cur.Owner {
			return protocol.Conversation{}, protocol.Errorf(protocol.Denied, "only the conversation's owner (%s) or an admin changes its visibility", cur.Owner).
				With("reason", "owner")
		}
	}
	if err := validTitle(req.Title); err != nil {
		return protocol.Conversation{}, err
	}
	if req.Model != nil && *req.Model != "" && c.models.get(*req.Model) == nil {
		return protocol.Conversation{}, protocol.Errorf(protocol.Validation, "model %q is not configured on this daemon; choose one of %s", *req.Model, c.models.names()).
			With("field", "model")
	}
	p := store.UpdateConversationParams{ID: id, Title: req.Title, Pinned: req.Pinned, Model: req.Model, Visibility: req.Visibility, Now: c.now()}
	if req.Status != nil {
		s := store.ConversationStatus(*req.Status)
		if s != store.ConversationActive && s != store.ConversationArchived {
			return protocol.Conversation{}, protocol.Errorf(protocol.Validation, "status must be active or archived").With("field", "status")
		}
		p.Status = &s
	}
	conv, err := c.store.UpdateConversation(ctx, p)
	return conversationView(conv), err
}

// DeleteConversation marks a conversation deleted (stage one of ADR D1's two).
func (c *Coordinator) DeleteConversation(ctx context.Context, id string) (protocol.Conversation, error) {
	if _, err := c.conversation(ctx, id); err != nil {
		return protocol.Conversation{}, err
	}
	conv, err := c.store.DeleteConversation(ctx, store.DeleteConversationParams{ID: id, Now: c.now()})
	return conversationView(conv), err
}

// Audit actions of what a person or program does in a conversation
// besides deciding proposals: the actor is the principal, never a model.
const (
	TurnSubmittedAction      = "studio.operator.turn_submitted"
	EffectAcknowledgedAction = "studio.operator.effect_acknowledged"
)

// personAudit is the audit row of an act of the request's principal, or
// nil for the daemon's own work (no principal): that is recorded where it
// happens, as before.
func personAudit(ctx context.Context, action, target string, details map[string]any, now time.Time) *store.AppendAdminEventParams {
	name := principalName(ctx)
	if name == "" {
		return nil
	}
	b, err := protocol.Marshal(details)
	if err != nil {
		b = []byte(`{}`)
	}
	return &store.AppendAdminEventParams{Actor: name, Action: action, TargetID: &target, Details: b, Now: now}
}

// conversationView is the wire form of a conversation.
func conversationView(c store.Conversation) protocol.Conversation {
	return protocol.Conversation{ID: c.ID, Project: c.Project, Title: c.Title, Status: string(c.Status),
		LastSequence: c.LastSequence(), ActiveRequestID: c.ActiveRequestID,
		CreatedAt: protocol.Timestamp(c.CreatedAt), UpdatedAt: protocol.Timestamp(c.UpdatedAt), ArchivedAt: stamp(c.ArchivedAt),
		Pinned: c.Pinned, Model: c.Model, ForkedFrom: forkView(c.ForkedFrom), DeletedAt: stamp(c.DeletedAt),
		Owner: c.Owner, Visibility: c.Visibility}
}

// turnView is the wire form of a turn.
func turnView(t store.Turn) protocol.Turn {
	return protocol.Turn{RequestID: t.RequestID, ConversationID: t.ConversationID, Status: string(t.Status),
		ErrorCode: t.ErrorCode, CreatedAt: protocol.Timestamp(t.CreatedAt), StartedAt: stamp(t.StartedAt),
		EndedAt: stamp(t.EndedAt), CancelRequestedAt: stamp(t.CancelRequestedAt)}
}

// stamp is an optional time as optional Unix seconds.
func stamp(t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	f := protocol.Timestamp(*t)
	return &f
}
