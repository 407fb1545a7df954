package coordinator

import (
	"context"
	"time"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/tools"
)

// The engine's side of the conversation service (internal/conversations):
// the engine reads conversations and their records through the service's
// visibility rules, answers what the service asks of it
// (conversations.Engine), and keeps the live view reports its turns read.
// Also here: the wire form of a turn and the audit row of what a person
// does in a conversation.

var _ conversations.Engine = (*Coordinator)(nil)

// conversation returns a visible conversation (conversations.Get):
// deleted, missing and another principal's private one are not_found.
func (c *Coordinator) conversation(ctx context.Context, id string) (store.Conversation, error) {
	return conversations.Get(ctx, c.store, id)
}

// ofConversation reads a record (a turn, a proposal, an effect) by id and
// returns it only if it belongs to the visible conversation convID:
// anything else is not_found, as if it did not exist (conversations.Record).
func ofConversation[T any](ctx context.Context, c *Coordinator, convID, what, id string,
	get func(context.Context, string) (T, error), owner func(T) string) (T, error) {
	return conversations.Record(ctx, c.store, convID, what, id, get, owner)
}

// visibleTo is the listings' filter of the request's principal
// (conversations.VisibleTo).
func visibleTo(ctx context.Context) string { return conversations.VisibleTo(ctx) }

// LiveViews are the cockpit's view reports: the conversation service
// writes them, this engine's turns read them (liveView).
func (c *Coordinator) LiveViews() *conversations.Views { return c.views }

// liveView is the view get_current_view answers with in a turn submitted
// at submitted with snapshot snap: the freshest report observed after the
// submission, else the snapshot.
func (c *Coordinator) liveView(convID string, submitted time.Time, snap protocol.ContextSnapshot) tools.LiveView {
	if view, at, ok := c.views.Latest(convID); ok && at.After(submitted) {
		obs := protocol.Timestamp(at)
		return tools.LiveView{View: view, Source: tools.ViewFromReport, ObservedAt: &obs}
	}
	return tools.LiveView{View: snap, Source: tools.ViewFromSnapshot}
}

// Audit actions of what a person or program does in a conversation
// besides deciding proposals: the actor is the principal, never a model.
const (
	TurnSubmittedAction      = "studio.operator.turn_submitted"
	EffectAcknowledgedAction = "studio.operator.effect_acknowledged"
)

// personAudit is the audit row of an act of the request's principal, or
// nil for the daemon's own work (no principal): that work writes its own
// audit row where it happens.
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

// principalName is the name of the principal a request acts for: the
// audit's actor for what it causes ("" when none, then studio_operator).
func principalName(ctx context.Context) string {
	p, _ := protocol.PrincipalFrom(ctx)
	return p.Name
}
