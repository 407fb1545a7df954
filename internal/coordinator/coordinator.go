// Package coordinator owns the operator's turn state machine (ADR-0083 D1,
// D2): conversations, submission with one active turn per conversation, a
// bounded pool that runs turns against the model, cancellation, restart
// recovery and graceful shutdown, and stream tickets. Every frame it emits
// goes through the store first; streams only ever read committed frames.
package coordinator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/routes"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/tools"
)

// Defaults of Config fields left zero.
const (
	DefaultWorkers       = 8
	DefaultMaxToolRounds = 8
	DefaultTicketTTL     = 60 * time.Second
	DefaultShutdownGrace = 5 * time.Second
	DefaultTextFlush     = 50 * time.Millisecond
	DefaultEffectTTL     = 10 * time.Minute
)

// Config wires a Coordinator. Store and Provider are required.
type Config struct {
	Store    store.Store
	Provider model.Provider
	Now      func() time.Time
	Logger   *slog.Logger
	// Workers bounds the turns that run at once across conversations.
	Workers int
	// MaxToolRounds bounds model round trips per turn.
	MaxToolRounds int
	// TicketTTL is how long a stream ticket may be redeemed (ADR D6: 60 s).
	TicketTTL time.Duration
	// ShutdownGrace is how long Shutdown lets running turns finish.
	ShutdownGrace time.Duration
	// TextFlush coalesces model text deltas into frames at most this often.
	TextFlush time.Duration
	// Tools is the tool registry offered to the model; nil offers none.
	Tools *tools.Registry
	// Routes validates effects and acknowledgements (default routes.Default).
	Routes *routes.Registry
	// EffectTTL is how long an emitted effect stays valid (default 10 minutes).
	EffectTTL time.Duration
	// ProposalTTL is how long a proposal waits for a human (default 10 minutes).
	ProposalTTL time.Duration
	// ModelRetries is how many times a retryable model failure is retried
	// (default 3; negative: never).
	ModelRetries int
	// RetryBackoff is the first retry's wait, doubled each time up to
	// MaxRetryBackoff; a provider's Retry-After hint is honoured up to
	// MaxRetryWait.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	MaxRetryWait    time.Duration
	// SweepInterval is how often pending proposals are checked for expiry;
	// zero disables the sweeper (tests call ExpireDue).
	SweepInterval time.Duration
}

// Coordinator runs operator turns.
type Coordinator struct {
	cfg    Config
	store  store.Store
	routes *routes.Registry
	tools  *tools.Registry
	log    *slog.Logger
	now    func() time.Time
	slots  chan struct{}
	base   context.Context
	stop   context.CancelCauseFunc
	// stopSweep ends the expiry sweeper at shutdown, before running turns
	// are given their grace period.
	sweepCtx  context.Context
	stopSweep context.CancelFunc
	wg        sync.WaitGroup
	mu        sync.Mutex
	closed    bool
	active    map[string]context.CancelCauseFunc // request id -> cancel of its run
	flights   map[string]*inflight               // proposal id -> its execution
}

// Causes of a turn's context cancellation.
var (
	errCancelRequested = errors.New("cancel requested")
	errShutdown        = errors.New("daemon shutting down")
)

// New returns a Coordinator; call Recover before serving.
func New(cfg Config) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxToolRounds <= 0 {
		cfg.MaxToolRounds = DefaultMaxToolRounds
	}
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.TextFlush <= 0 {
		cfg.TextFlush = DefaultTextFlush
	}
	if cfg.EffectTTL <= 0 {
		cfg.EffectTTL = DefaultEffectTTL
	}
	if cfg.ProposalTTL <= 0 {
		cfg.ProposalTTL = DefaultProposalTTL
	}
	switch {
	case cfg.ModelRetries == 0:
		cfg.ModelRetries = 3
	case cfg.ModelRetries < 0:
		cfg.ModelRetries = 0
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 500 * time.Millisecond
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = 5 * time.Second
	}
	if cfg.MaxRetryWait <= 0 {
		cfg.MaxRetryWait = 30 * time.Second
	}
	if cfg.Routes == nil {
		cfg.Routes = &routes.Default
	}
	if cfg.Tools == nil {
		cfg.Tools = tools.NewRegistry()
	}
	base, stop := context.WithCancelCause(context.Background())
	sweepCtx, stopSweep := context.WithCancel(base)
	return &Coordinator{
		cfg: cfg, store: cfg.Store, log: cfg.Logger, now: cfg.Now, routes: cfg.Routes, tools: cfg.Tools,
		slots: make(chan struct{}, cfg.Workers), base: base, stop: stop, sweepCtx: sweepCtx, stopSweep: stopSweep,
		active: make(map[string]context.CancelCauseFunc), flights: make(map[string]*inflight),
	}
}

// Store is the StateDB the coordinator writes.
func (c *Coordinator) Store() store.Store { return c.store }

// Routes is the route registry effects are validated against.
func (c *Coordinator) Routes() *routes.Registry { return c.routes }

// Tools is the tool registry offered to the model.
func (c *Coordinator) Tools() *tools.Registry { return c.tools }

// ProviderName names the configured model provider.
func (c *Coordinator) ProviderName() string { return c.cfg.Provider.Name() }

// Recover fails the turns a previous process left queued or running
// (ADR D1): an error frame with service_restarted, then done(failed).
//
// A turn awaiting confirmation keeps its pending proposal confirmable: the
// stored frames are its resume handle (DESIGN.md §7). A proposal left
// executing is indeterminate — its outcome is unknown, so it is never run
// again: its audit trail says so, doctor lists it, its turn fails, and an
// admin reconcile_proposal records what really happened. Recover also
// starts the expiry sweeper.
func (c *Coordinator) Recover(ctx context.Context) ([]store.Turn, error) {
	turns, err := c.store.RecoverTurns(ctx, store.RecoverTurnsParams{Now: c.now()})
	for _, t := range turns {
		c.log.Warn("failed turn interrupted by restart", "conversation", t.ConversationID, "request", t.RequestID)
	}
	if err != nil {
		return turns, err
	}
	if err := c.recoverExecuting(ctx); err != nil {
		return turns, err
	}
	if err := c.closeOrphans(ctx); err != nil {
		return turns, err
	}
	if _, err := c.ExpireDue(ctx); err != nil {
		return turns, err
	}
	if c.cfg.SweepInterval > 0 {
		c.wg.Add(1)
		go c.sweep()
	}
	return turns, nil
}

// recoverExecuting marks proposals a previous process left executing as
// indeterminate (once) and fails their turns.
func (c *Coordinator) recoverExecuting(ctx context.Context) error {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalExecuting}, Limit: 1000})
	if err != nil {
		return err
	}
	for _, p := range ps {
		c.mu.Lock()
		_, running := c.flights[p.ID]
		c.mu.Unlock()
		if running {
			continue
		}
		rows, err := c.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: p.ID, Limit: 50})
		if err != nil {
			return err
		}
		recorded := false
		for _, r := range rows {
			var d protocol.CommandAudit
			if protocol.Unmarshal(r.Details, &d) == nil && d.Decision == protocol.DecisionIndeterminate {
				recorded = true
			}
		}
		if !recorded {
			if _, err := c.store.AppendAdminEvent(ctx, audit(p, protocol.DecisionIndeterminate, nil, nil, c.now())); err != nil {
				return err
			}
		}
		c.log.Warn("proposal outcome is indeterminate; reconcile it", "proposal", p.ID, "command", p.CommandType)
		pe := protocol.Errorf(protocol.ServiceRestarted,
			"the daemon stopped while the confirmed command was executing; its outcome is unknown and it will not run again until reconciled").
			With("proposalId", p.ID)
		c.endTurn(store.Turn{RequestID: p.RequestID, ConversationID: p.ConversationID}, store.TurnFailed, pe)
	}
	return nil
}

// closeOrphans cancels pending proposals whose turn already ended (a daemon
// that died between storing a proposal and parking its turn): audited as
// denied, with no frames, since the turn is over.
func (c *Coordinator) closeOrphans(ctx context.Context) error {
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 1000})
	if err != nil {
		return err
	}
	for _, p := range ps {
		t, err := c.store.GetTurn(ctx, p.RequestID)
		if err != nil {
			return err
		}
		if !t.Status.Terminal() {
			continue
		}
		now := c.now()
		closed := p
		closed.CompletedAt = &now
		code := string(protocol.ServiceRestarted)
		if _, _, err := c.store.CloseProposal(ctx, store.CloseProposalParams{ID: p.ID, Status: store.ProposalCancelled, ErrorCode: &code,
			Now: now, Audit: audit(closed, protocol.DecisionDenied, nil, &code, now)}); err != nil && !protocol.IsCode(err, protocol.Conflict) {
			return err
		}
		c.log.Warn("cancelled a proposal whose turn ended", "proposal", p.ID, "turn_status", t.Status)
	}
	return nil
}

// sweep expires due proposals until shutdown.
func (c *Coordinator) sweep() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-c.sweepCtx.Done():
			return
		case <-t.C:
			if _, err := c.ExpireDue(c.base); err != nil && c.base.Err() == nil {
				c.log.Error("expire proposals", "err", err)
			}
		}
	}
}

// Shutdown stops accepting turns, lets running turns finish for the grace
// period, then ends the rest as service_restarted and waits for them.
func (c *Coordinator) Shutdown(ctx context.Context) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stopSweep()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	grace := time.NewTimer(c.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		c.stop(errShutdown)
		return
	case <-grace.C:
	case <-ctx.Done():
	}
	c.stop(errShutdown)
	<-done
}

// conversation returns a visible conversation: deleted is not_found everywhere.
func (c *Coordinator) conversation(ctx context.Context, id string) (store.Conversation, error) {
	if _, err := uuid.Parse(id); err != nil {
		return store.Conversation{}, protocol.Errorf(protocol.NotFound, "conversation %s not found", id)
	}
	conv, err := c.store.GetConversation(ctx, id)
	if err != nil {
		return conv, err
	}
	if conv.Status == store.ConversationDeleted {
		return conv, protocol.Errorf(protocol.NotFound, "conversation %s not found", id)
	}
	return conv, nil
}

// CreateConversation creates an active conversation.
func (c *Coordinator) CreateConversation(ctx context.Context, req protocol.CreateConversationRequest) (store.Conversation, error) {
	if err := validTitle(req.Title); err != nil {
		return store.Conversation{}, err
	}
	if req.Project != nil && (len(*req.Project) == 0 || len(*req.Project) > 200) {
		return store.Conversation{}, protocol.Errorf(protocol.Validation, "project must be 1 to 200 characters").With("field", "project")
	}
	return c.store.CreateConversation(ctx, store.CreateConversationParams{
		ID: uuid.NewString(), Project: req.Project, Title: req.Title, Now: c.now(),
	})
}

func validTitle(t *string) error {
	if t != nil && len([]rune(*t)) > 200 {
		return protocol.Errorf(protocol.Validation, "title must be at most 200 characters").With("field", "title")
	}
	return nil
}

// GetConversation returns a visible conversation.
func (c *Coordinator) GetConversation(ctx context.Context, id string) (store.Conversation, error) {
	return c.conversation(ctx, id)
}

// ListConversations pages conversations newest first.
func (c *Coordinator) ListConversations(ctx context.Context, p store.ListConversationsParams) ([]store.Conversation, error) {
	switch p.Status {
	case "", store.ConversationActive, store.ConversationArchived:
	default:
		return nil, protocol.Errorf(protocol.Validation, "status must be active or archived").With("field", "status")
	}
	return c.store.ListConversations(ctx, p)
}

// UpdateConversation renames, archives or unarchives a conversation.
func (c *Coordinator) UpdateConversation(ctx context.Context, id string, req protocol.UpdateConversationRequest) (store.Conversation, error) {
	if _, err := c.conversation(ctx, id); err != nil {
		return store.Conversation{}, err
	}
	if err := validTitle(req.Title); err != nil {
		return store.Conversation{}, err
	}
	p := store.UpdateConversationParams{ID: id, Title: req.Title, Now: c.now()}
	if req.Status != nil {
		s := store.ConversationStatus(*req.Status)
		if s != store.ConversationActive && s != store.ConversationArchived {
			return store.Conversation{}, protocol.Errorf(protocol.Validation, "status must be active or archived").With("field", "status")
		}
		p.Status = &s
	}
	return c.store.UpdateConversation(ctx, p)
}

// DeleteConversation marks a conversation deleted (stage one of ADR D1's two).
func (c *Coordinator) DeleteConversation(ctx context.Context, id string) (store.Conversation, error) {
	if _, err := c.conversation(ctx, id); err != nil {
		return store.Conversation{}, err
	}
	return c.store.DeleteConversation(ctx, store.DeleteConversationParams{ID: id, Now: c.now()})
}

// contextRecord is what a turn's context_json holds: the snapshot the
// operator submitted and, once compiled, the model context receipt.
type contextRecord struct {
	Snapshot protocol.ContextSnapshot `json:"snapshot"`
	Receipt  *Receipt                 `json:"receipt,omitempty"`
}

// SubmitTurn validates and durably accepts a turn, then schedules it.
func (c *Coordinator) SubmitTurn(ctx context.Context, convID string, req protocol.TurnRequest) (protocol.TurnAccepted, error) {
	if err := req.Validate(); err != nil {
		return protocol.TurnAccepted{}, err
	}
	if _, err := c.conversation(ctx, convID); err != nil {
		return protocol.TurnAccepted{}, err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return protocol.TurnAccepted{}, protocol.Errorf(protocol.ServiceFailure, "the daemon is shutting down")
	}
	record, err := protocol.Marshal(contextRecord{Snapshot: req.Context})
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	snap, err := protocol.Marshal(req.Context)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	hash, err := protocol.CommandHash(snap)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	turn, frame, err := c.store.SubmitTurn(ctx, store.SubmitTurnParams{
		ConversationID: convID, RequestID: uuid.NewString(), Instruction: req.Instruction,
		ContextJSON: record, ContextHash: hash, ExpectedLastSequence: *req.ExpectedLastSequence, Now: c.now(),
	})
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	c.schedule(turn)
	return protocol.TurnAccepted{ConversationID: convID, RequestID: turn.RequestID, AcceptedSequence: frame.Sequence}, nil
}

// schedule starts the turn's goroutine; it waits for a worker slot.
func (c *Coordinator) schedule(t store.Turn) { c.start(t, false) }

// continueTurn schedules a turn that a proposal decision resumed.
func (c *Coordinator) continueTurn(requestID, convID string) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		// The daemon is stopping: the turn is running in the store, so the
		// next start's recovery ends it honestly.
		return
	}
	c.start(store.Turn{RequestID: requestID, ConversationID: convID}, true)
}

// start runs a turn on its own goroutine once a worker slot is free.
func (c *Coordinator) start(t store.Turn, continuation bool) {
	ctx, cancel := context.WithCancelCause(c.base)
	c.mu.Lock()
	c.active[t.RequestID] = cancel
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.active, t.RequestID)
			c.mu.Unlock()
			cancel(nil)
		}()
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		case <-ctx.Done():
			c.endQueued(ctx, t)
			return
		}
		c.run(ctx, t, continuation)
	}()
}

// endQueued ends a turn that never got a worker slot.
func (c *Coordinator) endQueued(ctx context.Context, t store.Turn) {
	if errors.Is(context.Cause(ctx), errCancelRequested) {
		return // RequestCancel already ended a queued turn
	}
	c.endTurn(t, store.TurnFailed, restartedError())
}

func restartedError() *protocol.Error {
	return protocol.Errorf(protocol.ServiceRestarted, "the daemon shut down before this turn completed")
}

// CancelTurn asks for a turn's cancellation; it is idempotent and answers
// the turn's current state.
func (c *Coordinator) CancelTurn(ctx context.Context, convID, requestID string) (store.Turn, error) {
	if _, err := c.conversation(ctx, convID); err != nil {
		return store.Turn{}, err
	}
	if _, err := uuid.Parse(requestID); err != nil {
		return store.Turn{}, protocol.Errorf(protocol.NotFound, "request %s not found", requestID)
	}
	t, err := c.store.GetTurn(ctx, requestID)
	if err != nil {
		return t, err
	}
	if t.ConversationID != convID {
		return store.Turn{}, protocol.Errorf(protocol.NotFound, "request %s not found", requestID)
	}
	if t.Status.Terminal() {
		return t, nil
	}
	t, _, err = c.store.RequestCancel(ctx, store.RequestCancelParams{RequestID: requestID, Now: c.now()})
	if err != nil {
		return t, err
	}
	c.mu.Lock()
	cancel := c.active[requestID]
	c.mu.Unlock()
	if cancel != nil {
		cancel(errCancelRequested)
		return t, nil
	}
	if t.Status == store.TurnAwaitingConfirmation {
		// No goroutine holds a parked turn: end it here, unless its confirmed
		// command is executing — then the result continues the turn, which
		// sees the cancellation and ends it.
		executing, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: requestID,
			Statuses: []store.ProposalStatus{store.ProposalExecuting}, Limit: 1})
		if err != nil {
			return t, err
		}
		if len(executing) == 0 {
			c.endTurn(t, store.TurnCancelled, nil)
			return c.store.GetTurn(ctx, requestID)
		}
	}
	return t, nil
}

// endTurn ends a turn: its pending proposals are cancelled first (audited as
// denied), then the error and done frames are written with its status.
func (c *Coordinator) endTurn(t store.Turn, status store.TurnStatus, perr *protocol.Error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.closeTurnProposals(ctx, t.RequestID)
	c.finish(t.RequestID, status, perr)
}

// finish ends a turn durably; losing the race to another ending is fine.
func (c *Coordinator) finish(requestID string, status store.TurnStatus, perr *protocol.Error) {
	// A fresh context: the turn's own may be cancelled, its ending must not be.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := c.store.FinishTurn(ctx, store.FinishTurnParams{RequestID: requestID, Status: status, Error: perr, Now: c.now()})
	if err != nil && !protocol.IsCode(err, protocol.Conflict) {
		c.log.Error("finish turn", "request", requestID, "status", status, "err", err)
	}
}

// CreateStreamTicket issues a one-use credential for one conversation and
// cursor (ADR D6). Only its SHA-256 is stored.
func (c *Coordinator) CreateStreamTicket(ctx context.Context, req protocol.StreamTicketRequest) (protocol.StreamTicket, error) {
	conv, err := c.conversation(ctx, req.ConversationID)
	if err != nil {
		return protocol.StreamTicket{}, err
	}
	if req.AfterSequence < 0 {
		return protocol.StreamTicket{}, protocol.Errorf(protocol.Validation, "afterSequence must be at least 0").With("field", "afterSequence")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return protocol.StreamTicket{}, fmt.Errorf("ticket entropy: %w", err)
	}
	ticket := base64.RawURLEncoding.EncodeToString(raw[:])
	now := c.now()
	expires := now.Add(c.cfg.TicketTTL)
	if err := c.store.CreateStreamTicket(ctx, store.CreateStreamTicketParams{
		TicketHash: HashTicket(ticket), ConversationID: conv.ID, AfterSequence: req.AfterSequence,
		ExpiresAt: expires, Now: now,
	}); err != nil {
		return protocol.StreamTicket{}, err
	}
	return protocol.StreamTicket{Ticket: ticket, ExpiresAt: protocol.Timestamp(expires)}, nil
}

// HashTicket is the stored form of a ticket.
func HashTicket(ticket string) string {
	sum := sha256.Sum256([]byte(ticket))
	return hex.EncodeToString(sum[:])
}

// RedeemStreamTicket spends a ticket for exactly the conversation and cursor
// it was issued for; anything else is auth_required.
func (c *Coordinator) RedeemStreamTicket(ctx context.Context, ticket, convID string, after int64) error {
	t, err := c.store.RedeemStreamTicket(ctx, store.RedeemStreamTicketParams{TicketHash: HashTicket(ticket), Now: c.now()})
	if err != nil {
		return err
	}
	if t.ConversationID != convID || t.AfterSequence != after {
		return protocol.Errorf(protocol.AuthRequired, "stream ticket was issued for another conversation or cursor")
	}
	return nil
}

// OpenStream checks that a stream from cursor after may start: the
// conversation is visible and the cursor is not older than retained frames.
func (c *Coordinator) OpenStream(ctx context.Context, convID string, after int64) (store.Conversation, error) {
	conv, err := c.conversation(ctx, convID)
	if err != nil {
		return conv, err
	}
	if after < 0 {
		return conv, protocol.Errorf(protocol.Validation, "after_sequence must be at least 0").With("field", "after_sequence")
	}
	if err := replayGap(conv, after); err != nil {
		return conv, err
	}
	return conv, nil
}

// replayGap refuses a cursor older than the retained frames (ADR D6): the
// stream never silently starts later.
func replayGap(conv store.Conversation, after int64) error {
	if after+1 < conv.RetainedFrom {
		return protocol.Errorf(protocol.ReplayGap, "frames up to %d were purged", conv.RetainedFrom-1).
			With("earliestAfterSequence", conv.RetainedFrom-1)
	}
	return nil
}

// ReadFrames reads one page of frames after a cursor, checking for a purge
// that happened while the stream was open.
func (c *Coordinator) ReadFrames(ctx context.Context, convID string, after int64, limit int) ([]store.Frame, error) {
	frames, err := c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	if len(frames) > 0 && frames[0].Sequence != after+1 {
		conv, err := c.store.GetConversation(ctx, convID)
		if err != nil {
			return nil, err
		}
		if err := replayGap(conv, after); err != nil {
			return nil, err
		}
	}
	return frames, nil
}

// Subscribe follows the conversation's commits from memory: the live part of a
// stream (store.Feed).
func (c *Coordinator) Subscribe(convID string) *store.Subscription { return c.store.Subscribe(convID) }

// FrameSignal is closed after the next commit of frames to the conversation.
func (c *Coordinator) FrameSignal(convID string) <-chan struct{} { return c.store.FrameSignal(convID) }

// Page returns a conversation with one page of frames after a cursor.
func (c *Coordinator) Page(ctx context.Context, convID string, after int64, limit int) (protocol.ConversationPage, error) {
	conv, err := c.OpenStream(ctx, convID, after)
	if err != nil {
		return protocol.ConversationPage{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	frames, err := c.ReadFrames(ctx, convID, after, limit+1)
	if err != nil {
		return protocol.ConversationPage{}, err
	}
	page := protocol.ConversationPage{Conversation: ConversationView(conv), Frames: []protocol.RawFrame{},
		NextAfterSequence: after, LatestSequence: conv.LastSequence()}
	if len(frames) > limit {
		frames, page.HasMore = frames[:limit], true
	}
	for _, f := range frames {
		page.Frames = append(page.Frames, f.Wire())
		page.NextAfterSequence = f.Sequence
	}
	return page, nil
}

// ConversationView is the wire form of a conversation.
func ConversationView(c store.Conversation) protocol.Conversation {
	v := protocol.Conversation{ID: c.ID, Project: c.Project, Title: c.Title, Status: string(c.Status),
		LastSequence: c.LastSequence(), ActiveRequestID: c.ActiveRequestID,
		CreatedAt: protocol.Timestamp(c.CreatedAt), UpdatedAt: protocol.Timestamp(c.UpdatedAt)}
	if c.ArchivedAt != nil {
		a := protocol.Timestamp(*c.ArchivedAt)
		v.ArchivedAt = &a
	}
	return v
}

// TurnView is the wire form of a turn.
func TurnView(t store.Turn) protocol.Turn {
	opt := func(tm *time.Time) *float64 {
		if tm == nil {
			return nil
		}
		f := protocol.Timestamp(*tm)
		return &f
	}
	return protocol.Turn{RequestID: t.RequestID, ConversationID: t.ConversationID, Status: string(t.Status),
		ErrorCode: t.ErrorCode, CreatedAt: protocol.Timestamp(t.CreatedAt), StartedAt: opt(t.StartedAt),
		EndedAt: opt(t.EndedAt), CancelRequestedAt: opt(t.CancelRequestedAt)}
}
