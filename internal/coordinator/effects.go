package coordinator

import (
	"context"
	"slices"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// AckEffect records the client's acknowledgement of an effect (docs/design.md §8):
// applied must report the route the effect leads to, rejected must carry one
// of the five codes; a repeat identical to the first is answered unchanged, a
// contradictory one is conflict, and an expired effect is stale_context.
func (c *Coordinator) AckEffect(ctx context.Context, convID, effectID string, req protocol.AckEffectRequest) (protocol.EffectState, error) {
	eff, err := c.ackEffect(ctx, convID, effectID, req)
	if err != nil {
		return protocol.EffectState{}, err
	}
	c.obs.EffectAcked(EffectAcked{Kind: eff.Type, Status: string(eff.Status)})
	return effectView(eff), nil
}

// EffectState is an effect's acknowledgement state as a client deciding
// whether to apply it must see it: a pending effect that can no longer be
// acknowledged (superseded, archived, past its expiry) reads as expired.
// Reading changes nothing; the next acknowledgement records the expiry.
func (c *Coordinator) EffectState(ctx context.Context, convID, effectID string) (protocol.EffectState, error) {
	eff, err := ofConversation(ctx, c, convID, "effect", effectID, c.store.GetEffect, func(e store.Effect) string { return e.ConversationID })
	if err != nil {
		return protocol.EffectState{}, err
	}
	if eff.Status == store.EffectPending {
		conv, err := c.store.GetConversation(ctx, convID)
		if err != nil {
			return protocol.EffectState{}, err
		}
		if c.effectExpired(ctx, conv, eff) != "" {
			eff.Status = store.EffectExpired
		}
	}
	return effectView(eff), nil
}

func (c *Coordinator) ackEffect(ctx context.Context, convID, effectID string, req protocol.AckEffectRequest) (store.Effect, error) {
	eff, err := ofConversation(ctx, c, convID, "effect", effectID, c.store.GetEffect, func(e store.Effect) string { return e.ConversationID })
	if err != nil {
		return eff, err
	}
	conv, err := c.store.GetConversation(ctx, convID)
	if err != nil {
		return eff, err
	}
	p := store.AckEffectParams{ID: effectID, ClientRoute: req.ClientRoute, RejectionCode: req.RejectionCode, Now: c.now()}
	switch req.Status {
	case string(store.EffectApplied):
		if req.ClientRoute == nil || *req.ClientRoute == "" {
			return eff, protocol.Errorf(protocol.Validation, "applied needs the resulting clientRoute").With("field", "clientRoute")
		}
		if req.RejectionCode != nil {
			return eff, protocol.Errorf(protocol.Validation, "applied takes no rejectionCode").With("field", "rejectionCode")
		}
		p.Status = store.EffectApplied
	case string(store.EffectRejected):
		if req.RejectionCode == nil || !slices.Contains(protocol.RejectionCodes, *req.RejectionCode) {
			return eff, protocol.Errorf(protocol.Validation, "rejected needs a rejectionCode, one of %v", protocol.RejectionCodes).With("field", "rejectionCode")
		}
		p.Status = store.EffectRejected
	default:
		return eff, protocol.Errorf(protocol.Validation, "status must be applied or rejected").With("field", "status")
	}
	if eff.Status == store.EffectPending {
		if reason := c.effectExpired(ctx, conv, eff); reason != "" {
			if _, err := c.store.AckEffect(ctx, store.AckEffectParams{ID: effectID, Status: store.EffectExpired, Now: c.now()}); err != nil {
				return eff, err
			}
			c.obs.EffectAcked(EffectAcked{Kind: eff.Type, Status: string(store.EffectExpired)})
			return eff, protocol.Errorf(protocol.StaleContext, "effect %s expired: %s", effectID, reason).With("status", string(store.EffectExpired))
		}
	}
	if p.Status == store.EffectApplied {
		if err := c.cfg.Routes.MatchesRoute(eff.Effect, *req.ClientRoute); err != nil {
			return eff, err
		}
	}
	details := map[string]any{"conversationId": convID, "requestId": eff.RequestID, "kind": eff.Type, "status": p.Status}
	if p.ClientRoute != nil {
		details["clientRoute"] = *p.ClientRoute
	}
	if p.RejectionCode != nil {
		details["rejectionCode"] = *p.RejectionCode
	}
	p.Audit = personAudit(ctx, EffectAcknowledgedAction, effectID, details, p.Now)
	return c.store.AckEffect(ctx, p)
}

// effectExpired says why a pending effect is no longer valid, or "": its
// conversation was archived, a newer turn started, or its time ran out.
func (c *Coordinator) effectExpired(ctx context.Context, conv store.Conversation, eff store.Effect) string {
	if conv.Status != store.ConversationActive {
		return "the conversation was archived"
	}
	if !c.now().Before(eff.ExpiresAt) {
		return "it is older than its expiry"
	}
	if conv.ActiveRequestID != nil && *conv.ActiveRequestID != eff.RequestID {
		return "a newer turn started"
	}
	if conv.ActiveRequestID == nil {
		// The newest frame belongs to the newest turn.
		last, err := c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: conv.ID, AfterSequence: conv.LastSequence() - 1, Limit: 1})
		if err == nil && len(last) == 1 && last[0].RequestID != eff.RequestID {
			return "a newer turn started"
		}
	}
	return ""
}

// effectView is the wire form of an effect's acknowledgement state.
func effectView(e store.Effect) protocol.EffectState {
	return protocol.EffectState{EffectID: e.ID, Status: string(e.Status), ClientRoute: e.ClientRoute,
		RejectionCode: e.RejectionCode, ExpiresAt: protocol.Timestamp(e.ExpiresAt), AcknowledgedAt: stamp(e.AcknowledgedAt)}
}
