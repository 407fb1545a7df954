package store

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// EffectStatus is a UI effect's acknowledgement state (docs/design.md §8).
type EffectStatus string

// Effect states.
const (
	EffectPending  EffectStatus = "pending"
	EffectApplied  EffectStatus = "applied"
	EffectRejected EffectStatus = "rejected"
	EffectExpired  EffectStatus = "expired"
)

// Effect is a row of studio_operator_effects.
type Effect struct {
	ID             string
	ConversationID string
	RequestID      string
	Type           string // the effect kind
	Effect         protocol.Effect
	Status         EffectStatus
	EmittedAt      time.Time
	ExpiresAt      time.Time
	AcknowledgedAt *time.Time
	RejectionCode  *string
	ClientRoute    *string
}

// EffectStore keeps declarative UI effects and their acknowledgements.
type EffectStore interface {
	// EmitEffect inserts the pending effect row and its ui_command frame in one
	// transaction; only the conversation's active request may emit. An
	// invalid effect is validation.
	EmitEffect(ctx context.Context, p EmitEffectParams) (Effect, Frame, error)
	GetEffect(ctx context.Context, id string) (Effect, error)
	// AckEffect moves a pending effect to applied, rejected or expired. A
	// repeat identical to the stored acknowledgement returns it unchanged; a
	// contradictory one is conflict; acknowledging an expired effect is
	// stale_context. Any other status is validation.
	AckEffect(ctx context.Context, p AckEffectParams) (Effect, error)
	// ExpireEffects marks every pending effect whose expiry has passed
	// expired, so that the table tells the truth at rest; it returns how
	// many. (Effects superseded by a newer turn, or of a conversation
	// archived or deleted, are expired by those transitions.)
	ExpireEffects(ctx context.Context, p ExpireEffectsParams) (int64, error)
}

// ExpireEffectsParams expires the effects due at Now.
type ExpireEffectsParams struct {
	Now time.Time
}

// EmitEffectParams emits one effect.
type EmitEffectParams struct {
	ID             string
	ConversationID string
	RequestID      string
	Effect         protocol.Effect
	ExpiresAt      time.Time
	Now            time.Time
}

// AckEffectParams records an acknowledgement (or expiry when Status is expired).
type AckEffectParams struct {
	ID            string
	Status        EffectStatus
	ClientRoute   *string
	RejectionCode *string
	Now           time.Time
	// Audit, when set, is appended in the same transaction when the
	// acknowledgement changes the effect (never for a repeat).
	Audit *AppendAdminEventParams
}
