package conversations

import (
	"context"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// A conversation's history and life beyond its turns: forks and restore
// within the recovery window. Pinning and the model choice are fields of
// UpdateConversation.

// Restore audit constants: a restore is an operator action on the
// conversation itself, audited like the application's commands.
const (
	RestoreAction = "studio.operator.conversation.restore"
	RestoreActor  = "studio_cockpit"
)

// ForkConversation creates a conversation whose history is the source's
// up to a turn boundary (protocol.ForkRequest) and answers it with the
// first page of its copied frames. The source may be archived; a deleted
// one is not_found.
func (s *Service) ForkConversation(ctx context.Context, id string, req protocol.ForkRequest) (protocol.ConversationPage, error) {
	if _, err := Get(ctx, s.store, id); err != nil {
		return protocol.ConversationPage{}, err
	}
	if err := validTitle(req.Title); err != nil {
		return protocol.ConversationPage{}, err
	}
	if req.UpToSequence != nil && *req.UpToSequence < 0 {
		return protocol.ConversationPage{}, protocol.Errorf(protocol.Validation, "upToSequence must be at least 0").With("field", "upToSequence")
	}
	fork, err := s.store.ForkConversation(ctx, store.ForkConversationParams{SourceID: id, ID: uuid.NewString(),
		UpToSequence: req.UpToSequence, Title: req.Title, NewRequestID: uuid.NewString, Owner: principalName(ctx), Now: s.now()})
	if err != nil {
		return protocol.ConversationPage{}, err
	}
	return s.Page(ctx, fork.ID, 0, 200)
}

// RestoreConversation brings back a conversation deleted within the
// recovery window, to the status it had, with an audit row.
func (s *Service) RestoreConversation(ctx context.Context, id string) (protocol.Conversation, error) {
	if _, err := getAny(ctx, s.store, id); err != nil {
		return protocol.Conversation{}, err
	}
	now := s.now()
	details, err := protocol.Marshal(map[string]any{"conversationId": id, "recoveryWindow": s.cfg.RecoveryWindow.String()})
	if err != nil {
		return protocol.Conversation{}, err
	}
	conv, err := s.store.RestoreConversation(ctx, store.RestoreConversationParams{ID: id, DeletedAfter: now.Add(-s.cfg.RecoveryWindow), Now: now,
		Audit: store.AppendAdminEventParams{Actor: restoreActor(ctx), Action: RestoreAction, TargetID: &id, Details: details, Now: now}})
	if err != nil {
		return protocol.Conversation{}, err
	}
	return View(conv), nil
}

// forkView is the wire form of a fork's origin.
func forkView(f *store.ForkOrigin) *protocol.ForkOrigin {
	if f == nil {
		return nil
	}
	return &protocol.ForkOrigin{ConversationID: f.ConversationID, Sequence: f.Sequence, CopiedThrough: f.CopiedThrough}
}

// restoreActor is the restoring principal, or RestoreActor without one.
func restoreActor(ctx context.Context) string {
	if name := principalName(ctx); name != "" {
		return name
	}
	return RestoreActor
}
