package coordinator

import (
	"context"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// A conversation's history and life beyond its turns: forks, restore within the recovery
// window, and search terms. Pinning and the model choice are fields of
// UpdateConversation.

// DefaultRecoveryWindow is how long a deleted conversation stays
// recoverable when Config.RecoveryWindow is zero (app.DefaultRecoveryWindow).
const DefaultRecoveryWindow = 7 * 24 * time.Hour

// Restore audit constants: a restore is an operator action on the
// conversation itself, audited like the application's commands.
const (
	RestoreAction = "studio.operator.conversation.restore"
	RestoreActor  = "studio_cockpit"
)

// maxSearchTerms and maxTermRunes bound a search query.
const (
	maxSearchTerms = 8
	maxTermRunes   = 64
	maxQueryRunes  = 200
)

// searchTerms splits a query into lower-case words of letters and digits,
// the only characters the search engines index (everything else separates
// words, as in their tokenizers), so no query syntax reaches them.
func searchTerms(q string) ([]string, error) {
	if len([]rune(q)) > maxQueryRunes {
		return nil, protocol.Errorf(protocol.Validation, "q must be at most %d characters", maxQueryRunes).With("field", "q")
	}
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	var out []string
	for _, w := range words {
		if r := []rune(w); len(r) > maxTermRunes {
			w = string(r[:maxTermRunes])
		}
		out = append(out, w)
		if len(out) == maxSearchTerms {
			break
		}
	}
	return out, nil
}

// ForkConversation creates a conversation whose history is the source's
// up to a turn boundary (protocol.ForkRequest) and answers it with the
// first page of its copied frames. The source may be archived; a deleted
// one is not_found.
func (c *Coordinator) ForkConversation(ctx context.Context, id string, req protocol.ForkRequest) (protocol.ConversationPage, error) {
	if _, err := c.conversation(ctx, id); err != nil {
		return protocol.ConversationPage{}, err
	}
	if err := validTitle(req.Title); err != nil {
		return protocol.ConversationPage{}, err
	}
	if req.UpToSequence != nil && *req.UpToSequence < 0 {
		return protocol.ConversationPage{}, protocol.Errorf(protocol.Validation, "upToSequence must be at least 0").With("field", "upToSequence")
	}
	fork, err := c.store.ForkConversation(ctx, store.ForkConversationParams{SourceID: id, ID: uuid.NewString(),
		UpToSequence: req.UpToSequence, Title: req.Title, NewRequestID: uuid.NewString, Owner: principalName(ctx), Now: c.now()})
	if err != nil {
		return protocol.ConversationPage{}, err
	}
	return c.Page(ctx, fork.ID, 0, 200)
}

// RestoreConversation brings back a conversation deleted within the
// recovery window, to the status it had, with an audit row.
func (c *Coordinator) RestoreConversation(ctx context.Context, id string) (protocol.Conversation, error) {
	if _, err := c.anyConversation(ctx, id); err != nil {
		return protocol.Conversation{}, err
	}
	now := c.now()
	details, err := protocol.Marshal(map[string]any{"conversationId": id, "recoveryWindow": c.cfg.RecoveryWindow.String()})
	if err != nil {
		return protocol.Conversation{}, err
	}
	conv, err := c.store.RestoreConversation(ctx, store.RestoreConversationParams{ID: id, DeletedAfter: now.Add(-c.cfg.RecoveryWindow), Now: now,
		Audit: store.AppendAdminEventParams{Actor: restoreActor(ctx), Action: RestoreAction, TargetID: &id, Details: details, Now: now}})
	if err != nil {
		return protocol.Conversation{}, err
	}
	return conversationView(conv), nil
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
