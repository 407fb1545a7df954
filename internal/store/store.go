// Package store defines StateDB: the durable records of the operator protocol
// (docs/design.md §3) and of the Studio application, as one Store interface with a
// params struct per operation. Backends live in sub-packages (sqlite,
// postgres) and must pass the conformance suite in storetest. Errors that
// callers act on are *protocol.Error values (not_found, conflict,
// stale_context); anything else is a backend failure, and Transient tells
// the ones that say the database is away for now (a restart, a lock
// timeout) from the rest.
//
// Several daemons may share a backend; every piece of work names its owner
// instance with an epoch, and an owner's writes are fenced by them
// (fence.go: the fencing protocol, and why a command the cluster declared
// indeterminate can never run afterwards).
package store

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
)

// Store is StateDB. Every method is safe for concurrent use.
type Store interface {
	ConversationStore
	TurnStore
	FrameStore
	TicketStore
	AuditStore
	EffectStore
	ProposalStore
	AppStore
	InstanceStore
	PrincipalStore
	WebhookStore

	// FrameSignal returns a channel that is closed after the next commit that
	// appends frames to the conversation (or purges it). Take the channel
	// before reading frames, then wait on it: no commit is missed.
	FrameSignal(conversationID string) <-chan struct{}

	// Subscribe follows a conversation's commits from memory (feed.Feed):
	// the live part of a stream. Close the subscription when done.
	Subscribe(conversationID string) *feed.Subscription

	// SchemaVersion is the highest applied migration.
	SchemaVersion(ctx context.Context) (int, error)

	Close() error
}

// ConversationStatus is a conversation's lifecycle state.
type ConversationStatus string

// Conversation states (docs/design.md §3).
const (
	ConversationActive   ConversationStatus = "active"
	ConversationArchived ConversationStatus = "archived"
	ConversationDeleted  ConversationStatus = "deleted"
)

// Conversation is a row of studio_operator_conversations.
type Conversation struct {
	ID              string
	Project         *string
	Title           *string
	Status          ConversationStatus
	NextSequence    int64
	ActiveRequestID *string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ArchivedAt      *time.Time
	DeletedAt       *time.Time
	// RetainedFrom is the lowest sequence still stored; frames below it were
	// purged and replay from an older cursor is a replay_gap.
	RetainedFrom int64
	// Pinned conversations list first.
	Pinned bool
	// Model is the configured model its turns use; nil is the daemon's default.
	Model *string
	// ForkedFrom is the source of a fork, nil for any other conversation.
	ForkedFrom *ForkOrigin
	// Owner is the name of the principal that created it; Visibility is
	// protocol.VisibilityPrivate (its owner and admins see it) or
	// protocol.VisibilityTeam (every principal does).
	Owner      string
	Visibility string
}

// VisibleTo reports whether the principal named name, of role, may see
// the conversation: an admin sees all, others their own and the team's.
func (c Conversation) VisibleTo(name string, role protocol.Role) bool {
	return role == protocol.RoleAdmin || c.Visibility != protocol.VisibilityPrivate || c.Owner == name
}

// ForkOrigin is where a fork's history came from: the source conversation
// and the sequence of the done frame its copied history ends with.
type ForkOrigin struct {
	ConversationID string
	Sequence       int64
	// CopiedThrough is the fork's last copied frame: its frames
	// 1..CopiedThrough are the source's history.
	CopiedThrough int64
}

// LastSequence is the sequence of the conversation's newest frame (0: none).
func (c Conversation) LastSequence() int64 { return c.NextSequence - 1 }

// TurnStatus is a turn's state (docs/design.md §6).
type TurnStatus string

// Turn states.
const (
	TurnQueued               TurnStatus = "queued"
	TurnRunning              TurnStatus = "running"
	TurnAwaitingConfirmation TurnStatus = "awaiting_confirmation"
	TurnCompleted            TurnStatus = "completed"
	TurnFailed               TurnStatus = "failed"
	TurnCancelled            TurnStatus = "cancelled"
)

// Terminal reports whether no transition leaves s.
func (s TurnStatus) Terminal() bool {
	return s == TurnCompleted || s == TurnFailed || s == TurnCancelled
}

// Outcome is the done-frame outcome of a terminal status.
func (s TurnStatus) Outcome() protocol.Outcome {
	switch s {
	case TurnCompleted:
		return protocol.OutcomeCompleted
	case TurnCancelled:
		return protocol.OutcomeCancelled
	}
	return protocol.OutcomeFailed
}

// Turn is a row of studio_operator_turns.
type Turn struct {
	RequestID         string
	ConversationID    string
	Instruction       string
	ContextJSON       jsontext.Value
	ContextHash       string
	Status            TurnStatus
	ErrorCode         *string
	CreatedAt         time.Time
	StartedAt         *time.Time
	EndedAt           *time.Time
	CancelRequestedAt *time.Time
	// CancelRequestedBy is the principal that asked for the cancel ("" for
	// none, or the daemon): the proposal the cancel closes is denied by it.
	CancelRequestedBy string
	// Owner is the instance that owns the turn ("" for none; see
	// InstanceStore), and Epoch how many times the owner changed (its
	// fencing token: fence.go).
	Owner string
	Epoch int64
	// SubmittedBy is the name of the principal that submitted the turn
	// ("" for turns from before principals, or without one).
	SubmittedBy string
	// QueueOrder is set while the turn waits behind its conversation's
	// active turn (whenBusy enqueue or interrupt): queued, owned by no
	// instance, without frames. The lowest goes first.
	QueueOrder *int64
	// Interrupts is the request id of the active turn this one (an
	// interrupt) asked to cancel.
	Interrupts string
}

// Waiting reports whether the turn waits behind another.
func (t Turn) Waiting() bool { return t.QueueOrder != nil }

// Frame is a row of studio_operator_frames. Payload is the stored JSON,
// validated when it was appended.
type Frame struct {
	ConversationID string
	Sequence       int64
	RequestID      string
	Type           protocol.FrameType
	Payload        jsontext.Value
	CreatedAt      time.Time
}

// Wire is the frame's version-1 envelope.
func (f Frame) Wire() protocol.RawFrame {
	return protocol.RawFrame{
		Version: protocol.Version, ConversationID: f.ConversationID, RequestID: f.RequestID,
		Sequence: f.Sequence, Type: f.Type, Payload: f.Payload, CreatedAt: protocol.Timestamp(f.CreatedAt),
	}
}

// Wire is frames as their version-1 envelopes.
func Wire(frames []Frame) []protocol.RawFrame {
	if len(frames) == 0 {
		return nil
	}
	out := make([]protocol.RawFrame, len(frames))
	for i, f := range frames {
		out[i] = f.Wire()
	}
	return out
}

// NewFrame is a frame to append; the store assigns its sequence.
type NewFrame struct {
	Payload protocol.Payload
}

// ConversationStore keeps conversations.
type ConversationStore interface {
	CreateConversation(ctx context.Context, p CreateConversationParams) (Conversation, error)
	// GetConversation returns the row whatever its status; not_found if absent.
	GetConversation(ctx context.Context, id string) (Conversation, error)
	ListConversations(ctx context.Context, p ListConversationsParams) ([]Conversation, error)
	// UpdateConversation renames and moves between active and archived; a
	// status change is refused (conflict) while a turn is active.
	UpdateConversation(ctx context.Context, p UpdateConversationParams) (Conversation, error)
	// DeleteConversation marks a conversation deleted (stage one of two).
	DeleteConversation(ctx context.Context, p DeleteConversationParams) (Conversation, error)
	// RestoreConversation brings a conversation deleted at or after
	// DeletedAfter back to the status it had (active, or archived), with
	// its audit row in the same transaction. Any other conversation is
	// not_found.
	RestoreConversation(ctx context.Context, p RestoreConversationParams) (Conversation, error)
	// ForkConversation creates a conversation whose history is a copy of
	// the source's frames up to a turn boundary, in one transaction (see
	// ForkConversationParams).
	ForkConversation(ctx context.Context, p ForkConversationParams) (Conversation, error)
}

// CreateConversationParams creates an active conversation.
type CreateConversationParams struct {
	ID      string
	Project *string
	Title   *string
	// Owner is the creating principal's name ("" for the bootstrap
	// owner); Visibility is private or team ("" for team).
	Owner      string
	Visibility string
	Now        time.Time
}

// ListConversationsParams pages conversations newest first. The cursor is the
// (CreatedAt, ID) of the last row of the previous page.
type ListConversationsParams struct {
	Status ConversationStatus // "" lists active and archived
	Limit  int
	// The cursor: pinned conversations come first, then by (CreatedAt, ID)
	// descending; AfterPinned is the pinned state of the previous page's
	// last row.
	AfterPinned  bool
	AfterCreated *time.Time
	AfterID      string
	// Terms, when set, keep the conversations whose title or turn text has
	// every term (a term matches words it begins).
	Terms []string
	// DeletedAfter, when set, keeps the conversations deleted after it.
	DeletedAfter *time.Time
	// VisibleTo, when set, keeps the conversations the principal of that
	// name may see: its own and the team's (admins set none).
	VisibleTo string
}

// UpdateConversationParams changes a title and/or moves between active and archived.
type UpdateConversationParams struct {
	ID     string
	Title  *string
	Status *ConversationStatus
	Pinned *bool
	// Model sets the conversation's model; "" clears it (the daemon's default).
	Model *string
	// Visibility sets private or team.
	Visibility *string
	Now        time.Time
}

// DeleteConversationParams marks a conversation deleted.
type DeleteConversationParams struct {
	ID  string
	Now time.Time
}

// TurnStore keeps turns and their state transitions.
type TurnStore interface {
	// SubmitTurn is one transaction: compare-and-set of active_request_id,
	// the turn row (queued) and its first frame (the user's instruction).
	// While another turn is active, a submission whose WhenBusy waits is
	// stored waiting behind it (Turn.Waiting; no frame), and an interrupt
	// records the cancel of the active turn (Turn.Interrupts) and notifies
	// its control key. The transaction that ends a turn (FinishTurn,
	// RequestCancel, RecoverTurns) makes the first waiting turn active —
	// claimable, owned by no instance — with its instruction frame; a
	// waiting turn whose cancel was requested ends there too, cancelled,
	// and the next one comes. TurnsQueued is notified.
	SubmitTurn(ctx context.Context, p SubmitTurnParams) (Turn, Frame, error)
	// ListWaitingTurns lists the turns waiting behind the conversation's
	// active turn, in the order they will run.
	ListWaitingTurns(ctx context.Context, conversationID string) ([]Turn, error)
	GetTurn(ctx context.Context, requestID string) (Turn, error)
	// StartTurn moves queued to running; anything else is conflict.
	StartTurn(ctx context.Context, p StartTurnParams) (Turn, error)
	// FinishTurn appends an optional error frame and the done frame, sets the
	// terminal status and clears active_request_id, in one transaction.
	FinishTurn(ctx context.Context, p FinishTurnParams) (Turn, []Frame, error)
	// RequestCancel is idempotent: a queued turn is cancelled at once (done
	// frame included), a running one gets cancel_requested_at, a finished one
	// is returned unchanged. A waiting turn gets cancel_requested_at and
	// ends, cancelled and never run, when its place comes. Its commit notifies the turn's control key.
	RequestCancel(ctx context.Context, p RequestCancelParams) (Turn, []Frame, error)
	// RecoverTurns fails every running turn, and every queued one a process
	// held, with service_restarted (error and done frames), one transaction
	// per turn: the start of a daemon that holds the database alone
	// (SQLite). A queued turn no process held (made active by the end of
	// the turn ahead of it) stays, to be claimed. Daemons that share one
	// end each other's work by lease instead (InstanceStore).
	RecoverTurns(ctx context.Context, p RecoverTurnsParams) ([]Turn, error)
	// SetTurnContext records the compiled context receipt of a turn.
	SetTurnContext(ctx context.Context, p SetTurnContextParams) error
}

// SubmitTurnParams submits one turn.
type SubmitTurnParams struct {
	ConversationID       string
	RequestID            string
	Instruction          string
	ContextJSON          jsontext.Value
	ContextHash          string
	ExpectedLastSequence int64
	Now                  time.Time
	// Instance owns the queued turn (it starts it unless another instance
	// claims it first).
	Instance string
	// SubmittedBy is the submitting principal's name ("" for none).
	SubmittedBy string
	// Audit, when set, is appended in the submit's transaction: a turn
	// refused leaves no audit row.
	Audit *AppendAdminEventParams
	// WhenBusy is what the submission does while another turn is active
	// ("" rejects). When it waits, ExpectedLastSequence may lag behind the
	// conversation's last sequence by the frames of its newest turn: it
	// must be at least that turn's first sequence.
	WhenBusy protocol.WhenBusy
}

// StartTurnParams starts a queued turn; Instance owns it from then on.
type StartTurnParams struct {
	RequestID string
	Now       time.Time
	Instance  string
}

// FinishTurnParams ends a turn. Status must be terminal; Error, when set, is
// appended as an error frame before done.
type FinishTurnParams struct {
	RequestID string
	Status    TurnStatus
	Error     *protocol.Error
	Now       time.Time
	// Instance, when set, must own the turn, or the turn must have no
	// owner (conflict otherwise): an instance never ends a turn that
	// another one took over.
	Instance string
}

// RequestCancelParams asks for a turn's cancellation.
type RequestCancelParams struct {
	RequestID string
	// By is the principal asking ("" for the daemon itself); the first
	// one asking is kept (Turn.CancelRequestedBy).
	By  string
	Now time.Time
}

// RecoverTurnsParams fails turns a previous process left unfinished.
type RecoverTurnsParams struct {
	Now time.Time
}

// SetTurnContextParams replaces a turn's context_json and context_hash.
type SetTurnContextParams struct {
	RequestID   string
	ContextJSON jsontext.Value
	ContextHash string
}

// FrameStore appends and reads frames.
type FrameStore interface {
	// AppendFrames gives each frame the next sequence, in one transaction.
	// Only the conversation's active request may append (conflict otherwise).
	AppendFrames(ctx context.Context, p AppendFramesParams) ([]Frame, error)
	// ListFrames returns up to Limit frames with sequence > AfterSequence, in order.
	ListFrames(ctx context.Context, p ListFramesParams) ([]Frame, error)
	// CountFrames counts one request's frames (of one type when Type is
	// set) without reading them: a turn may hold very many.
	CountFrames(ctx context.Context, p CountFramesParams) (int64, error)
}

// CountFramesParams selects the frames CountFrames counts.
type CountFramesParams struct {
	ConversationID string
	RequestID      string
	// Type, when set, counts only frames of that type.
	Type protocol.FrameType
}

// AppendFramesParams appends frames for the active request of a conversation.
type AppendFramesParams struct {
	ConversationID string
	RequestID      string
	Frames         []NewFrame
	Now            time.Time
}

// ListFramesParams pages frames by cursor.
type ListFramesParams struct {
	ConversationID string
	AfterSequence  int64
	Limit          int
	// RequestID, when set, keeps only that request's frames.
	RequestID string
}

// TicketStore keeps one-use stream tickets, stored only as hashes.
type TicketStore interface {
	CreateStreamTicket(ctx context.Context, p CreateStreamTicketParams) error
	// RedeemStreamTicket marks the ticket used and returns it; unknown, used
	// or expired tickets are auth_required.
	RedeemStreamTicket(ctx context.Context, p RedeemStreamTicketParams) (StreamTicket, error)
}

// StreamTicket is a row of studio_operator_stream_tickets.
type StreamTicket struct {
	TicketHash     string
	ConversationID string
	AfterSequence  int64
	ExpiresAt      time.Time
	CreatedAt      time.Time
	UsedAt         *time.Time
	// Minter is the credential that minted it, which its redemption
	// checks again (zero for tickets from before it was kept).
	Minter TicketMinter
}

// TicketMinter is who minted a ticket and with what credential: the
// principal's id and the SHA-256 of its bearer token ("" when a sign-in
// proxy named it, with the proxy's user and the groups it named).
type TicketMinter struct {
	PrincipalID string
	TokenHash   string
	// ProxyUser is the sign-in proxy's user that signed in as PrincipalID
	// ("" for a bearer token): redemption resolves it again.
	ProxyUser string
	Groups    []string
}

// CreateStreamTicketParams stores a new ticket's hash.
type CreateStreamTicketParams struct {
	TicketHash     string
	ConversationID string
	AfterSequence  int64
	Minter         TicketMinter
	ExpiresAt      time.Time
	Now            time.Time
}

// RedeemStreamTicketParams redeems a ticket by hash.
type RedeemStreamTicketParams struct {
	TicketHash string
	Now        time.Time
}

// AuditStore appends to and reads the append-only admin_events table.
type AuditStore interface {
	AppendAdminEvent(ctx context.Context, p AppendAdminEventParams) (AdminEvent, error)
	// ListAdminEvents pages events newest first.
	ListAdminEvents(ctx context.Context, p ListAdminEventsParams) ([]AdminEvent, error)
	// ListAuditActors returns up to limit of the distinct actors of the
	// audit trail, by name: who the trail can be filtered by.
	ListAuditActors(ctx context.Context, limit int) ([]string, error)
}

// AdminEvent is a row of admin_events.
type AdminEvent struct {
	ID        int64
	CreatedAt time.Time
	Actor     string
	Action    string
	TargetID  *string
	Details   jsontext.Value
}

// AppendAdminEventParams appends one audit row.
type AppendAdminEventParams struct {
	Actor    string
	Action   string
	TargetID *string
	Details  jsontext.Value
	Now      time.Time
}

// ListAdminEventsParams filters and pages audit rows, newest first.
type ListAdminEventsParams struct {
	Action   string
	TargetID string
	// Actor, CommandType (details.commandType) and Target (the row's target
	// id or the id of the resource its details name) filter too; Since and
	// Until bound the time, [Since, Until).
	Actor       string
	CommandType string
	Target      string
	Since       *time.Time
	Until       *time.Time
	BeforeID    int64 // 0: from the newest
	Limit       int
}
