// Package conversations is the conversation service (docs/design.md §3, §11,
// §12): conversations and their lifecycle (create, list and search, rename,
// archive, pin, choose a model, delete, restore within the recovery window,
// fork), the pages and streams of their frames (one-use stream tickets,
// cursors, replay gaps), the cockpit's live view reports, and the visibility
// rules every reader of a conversation applies (another principal's private
// conversation is not_found).
//
// It never imports the turn engine (internal/coordinator): the engine
// imports it, for its visibility rules and the live views, and the service
// asks the engine only what Engine says — a conversation's active turn's
// progress, whether a model is configured, and where the live views are
// kept. Dependencies point one way: coordinator → conversations → store.
package conversations

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Defaults of Config fields left zero.
const (
	// DefaultTicketTTL is how long a stream ticket may be redeemed
	// (docs/design.md §12).
	DefaultTicketTTL = 60 * time.Second
	// DefaultRecoveryWindow is how long a deleted conversation stays
	// recoverable (app.DefaultRecoveryWindow).
	DefaultRecoveryWindow = 7 * 24 * time.Hour
)

// Engine is what the service needs of the turn engine
// (*coordinator.Coordinator implements it).
type Engine interface {
	// TurnProgress is the progress of the active turn of conv, as just
	// read; nil when none runs or it cannot be read (a page stands
	// without it).
	TurnProgress(ctx context.Context, conv store.Conversation) *protocol.TurnProgress
	// CheckModel refuses, as a validation error of field model, a model
	// this daemon does not have.
	CheckModel(name string) error
	// LiveViews are the cockpit's view reports, which the engine's turns
	// read (get_current_view) and ReportView writes.
	LiveViews() *Views
}

// Config wires a Service. Store and Engine are required.
type Config struct {
	Store  store.Store
	Engine Engine
	Now    func() time.Time
	// TicketTTL is how long a stream ticket may be redeemed (docs/design.md §12: 60 s;
	// default DefaultTicketTTL).
	TicketTTL time.Duration
	// RecoveryWindow is how long a deleted conversation stays recoverable
	// (default DefaultRecoveryWindow).
	RecoveryWindow time.Duration
}

// Service serves conversations, their pages, streams and live views.
type Service struct {
	cfg    Config
	store  store.Store
	engine Engine
	now    func() time.Time
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	if cfg.RecoveryWindow <= 0 {
		cfg.RecoveryWindow = DefaultRecoveryWindow
	}
	return &Service{cfg: cfg, store: cfg.Store, engine: cfg.Engine, now: cfg.Now}
}

// principalName is the name of the principal a request acts for ("" when
// none: the daemon's own work).
func principalName(ctx context.Context) string {
	p, _ := protocol.PrincipalFrom(ctx)
	return p.Name
}
