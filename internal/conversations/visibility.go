package conversations

import (
	"context"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The visibility rules, shared with the engine: every read of a
// conversation, or of a record of one, goes through them.

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

// visible reports whether the request's principal may see conv. Work
// without a principal is the daemon's own (recovery, the sweeper) and
// sees everything.
func visible(ctx context.Context, conv store.Conversation) bool {
	p, ok := protocol.PrincipalFrom(ctx)
	return !ok || conv.VisibleTo(p.Name, p.Role)
}

// VisibleTo is the listings' filter of the request's principal: its name,
// or "" for an admin or the daemon's own work (everything).
func VisibleTo(ctx context.Context) string {
	p, ok := protocol.PrincipalFrom(ctx)
	if !ok || p.Role == protocol.RoleAdmin {
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
