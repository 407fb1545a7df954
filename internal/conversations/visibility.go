package conversations

import (
	"context"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The visibility rules, shared with the engine: every read of a
// conversation, or of a record of one, goes through them, and they are
// the policy's (read_conversation): none is decided here.

// Get returns a visible conversation: deleted is not_found everywhere,
// and so is one the request's principal may not see (another principal's
// private conversation), with the same answer as a missing one: its
// existence does not leak.
func Get(ctx context.Context, st store.ConversationStore, id string) (store.Conversation, error) {
	conv, err := getAny(ctx, st, id)
	if err != nil {
		return conv, err
	}
	if conv.Status == store.ConversationDeleted {
		return conv, notFound(id)
	}
	return conv, nil
}

// getAny is a conversation of any status that the request's principal may
// see; not_found otherwise.
func getAny(ctx context.Context, st store.ConversationStore, id string) (store.Conversation, error) {
	if _, err := uuid.Parse(id); err != nil {
		return store.Conversation{}, notFound(id)
	}
	conv, err := st.GetConversation(ctx, id)
	if err != nil {
		return conv, err
	}
	if !visible(ctx, conv) {
		return store.Conversation{}, notFound(id)
	}
	return conv, nil
}

func notFound(id string) error {
	return protocol.Errorf(protocol.NotFound, "conversation %s not found", id)
}

// visible reports whether the request's principal may read conv (the
// policy's read_conversation). Work without a principal is the daemon's
// own (recovery, the sweeper) and sees everything.
func visible(ctx context.Context, conv store.Conversation) bool {
	return policy.May(ctx, policy.ReadConversation, policy.ConversationOf(conv))
}

// VisibleTo is the store's coarse filter of a listing for the request's
// principal: its name (its own conversations and the team's), or "" when
// the policy lets it read another principal's private conversation (an
// admin) and for the daemon's own work. Each row listed is then decided
// on its own (visible): the filter only spares reading rows that could
// never be shown.
func VisibleTo(ctx context.Context) string {
	p, ok := protocol.PrincipalFrom(ctx)
	if !ok {
		return ""
	}
	others := policy.Conversation{ID: "-", Owner: "\x00another", Visibility: protocol.VisibilityPrivate}
	if policy.May(ctx, policy.ReadConversation, others) {
		return ""
	}
	return p.Name
}

// Record reads a record of a conversation (a turn, a proposal, an effect)
// by id with get, and returns it only if owner says it belongs to the
// visible conversation convID: anything else is not_found (what names the
// record), as if it did not exist.
func Record[T any](ctx context.Context, st store.ConversationStore, convID, what, id string,
	get func(context.Context, string) (T, error), owner func(T) string) (T, error) {
	var zero T
	if _, err := Get(ctx, st, convID); err != nil {
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
