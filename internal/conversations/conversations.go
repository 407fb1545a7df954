package conversations

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/paging"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// CreateConversation creates an active conversation.
func (s *Service) CreateConversation(ctx context.Context, req protocol.CreateConversationRequest) (protocol.Conversation, error) {
	return s.CreateConversationAs(ctx, uuid.NewString(), req)
}

// CreateConversationAs creates an active conversation whose id (a UUID)
// the door chose: an AG-UI thread is created on its first run under the
// id its client gave it.
func (s *Service) CreateConversationAs(ctx context.Context, id string, req protocol.CreateConversationRequest) (protocol.Conversation, error) {
	if _, err := uuid.Parse(id); err != nil {
		return protocol.Conversation{}, protocol.Errorf(protocol.Validation, "conversation id %q is not a UUID", id)
	}
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
	conv, err := s.store.CreateConversation(ctx, store.CreateConversationParams{
		ID: id, Project: req.Project, Title: secretsOut(req.Title), Owner: principalName(ctx), Visibility: visibility, Now: s.now(),
	})
	return View(conv), err
}

func validTitle(t *string) error {
	if t != nil && len([]rune(*t)) > 200 {
		return protocol.Errorf(protocol.Validation, "title must be at most 200 characters").With("field", "title")
	}
	return nil
}

// ListQuery pages conversations, pinned first, then newest first: Status
// is "", active, archived or deleted (those still recoverable); Q searches
// titles and turn text; Cursor is a previous page's NextCursor.
type ListQuery struct {
	Status string
	Limit  int
	Cursor string
	Q      string
}

// ListConversations pages conversations newest first.
func (s *Service) ListConversations(ctx context.Context, q ListQuery) (protocol.ConversationList, error) {
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
	p := store.ListConversationsParams{Status: status, Limit: limit + 1, Terms: terms, VisibleTo: VisibleTo(ctx)}
	if status == store.ConversationDeleted {
		since := s.now().Add(-s.cfg.RecoveryWindow)
		p.DeletedAfter = &since
	}
	if q.Q != "" && len(terms) == 0 { // nothing searchable: nothing matches
		return protocol.ConversationList{Conversations: []protocol.Conversation{}}, nil
	}
	if q.Cursor != "" {
		at := protocol.Time(cur.At)
		p.AfterPinned, p.AfterCreated, p.AfterID = cur.Seq == 1, &at, cur.ID
	}
	rows, err := s.store.ListConversations(ctx, p)
	if err != nil {
		return protocol.ConversationList{}, err
	}
	var out protocol.ConversationList
	page, next := paging.Cut(rows, limit, func(c store.Conversation) store.Conversation { return c }, func(conv store.Conversation) paging.Cursor {
		cur := paging.Cursor{List: "conversations", At: protocol.Timestamp(conv.CreatedAt), ID: conv.ID}
		if conv.Pinned {
			cur.Seq = 1
		}
		return cur
	})
	// The store's filter is coarse: each row is the policy's to show.
	// A page may come out shorter than limit; its cursor still leads on.
	out.Conversations, out.NextCursor = make([]protocol.Conversation, 0, len(page)), next
	for _, c := range page {
		if visible(ctx, c) {
			out.Conversations = append(out.Conversations, View(c))
		}
	}
	return out, nil
}

// UpdateConversation renames, archives or unarchives a conversation. An
// archived conversation is read-only: it takes a new title only when the
// same request unarchives it.
func (s *Service) UpdateConversation(ctx context.Context, id string, req protocol.UpdateConversationRequest) (protocol.Conversation, error) {
	cur, err := Get(ctx, s.store, id)
	if err != nil {
		return protocol.Conversation{}, err
	}
	if req.Visibility != nil {
		if _, err := protocol.ParseVisibility(*req.Visibility); err != nil {
			return protocol.Conversation{}, err
		}
		if err := policy.Ask(ctx, policy.SetVisibility, policy.ConversationOf(cur)); err != nil {
			return protocol.Conversation{}, err
		}
	}
	if err := validTitle(req.Title); err != nil {
		return protocol.Conversation{}, err
	}
	if req.Model != nil && *req.Model != "" {
		if err := s.engine.CheckModel(*req.Model); err != nil {
			return protocol.Conversation{}, err
		}
	}
	p := store.UpdateConversationParams{ID: id, Title: secretsOut(req.Title), Pinned: req.Pinned, Model: req.Model, Visibility: req.Visibility, Now: s.now()}
	if req.Status != nil {
		st := store.ConversationStatus(*req.Status)
		if st != store.ConversationActive && st != store.ConversationArchived {
			return protocol.Conversation{}, protocol.Errorf(protocol.Validation, "status must be active or archived").With("field", "status")
		}
		p.Status = &st
	}
	conv, err := s.store.UpdateConversation(ctx, p)
	return View(conv), err
}

// DeleteConversation marks a conversation deleted (stage one of two:
// docs/design.md §3). The store refuses it (conflict) while a turn is active,
// in the same transaction as the delete, so the engine's state needs no check
// here.
func (s *Service) DeleteConversation(ctx context.Context, id string) (protocol.Conversation, error) {
	if _, err := Get(ctx, s.store, id); err != nil {
		return protocol.Conversation{}, err
	}
	conv, err := s.store.DeleteConversation(ctx, store.DeleteConversationParams{ID: id, Now: s.now()})
	return View(conv), err
}

// View is the wire form of a conversation.
func View(c store.Conversation) protocol.Conversation {
	return protocol.Conversation{ID: c.ID, Project: c.Project, Title: c.Title, Status: string(c.Status),
		LastSequence: c.LastSequence(), ActiveRequestID: c.ActiveRequestID,
		CreatedAt: protocol.Timestamp(c.CreatedAt), UpdatedAt: protocol.Timestamp(c.UpdatedAt), ArchivedAt: stamp(c.ArchivedAt),
		Pinned: c.Pinned, Model: c.Model, ForkedFrom: forkView(c.ForkedFrom), DeletedAt: stamp(c.DeletedAt),
		Owner: c.Owner, Visibility: c.Visibility}
}

// stamp is an optional time as optional Unix seconds.
func stamp(t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	f := protocol.Timestamp(*t)
	return &f
}

// secretsOut is a title as it is kept: without a secret pasted into it
// (titles are searched and shown to every reader of the conversation).
func secretsOut(title *string) *string {
	if title == nil {
		return nil
	}
	t := redact.Secrets(*title)
	return &t
}
