package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
)

// Defaults of Config fields left zero.
const (
	DefaultWorkers             = 8
	DefaultMaxQueuedTurns      = 64
	DefaultMaxToolRounds       = 8
	DefaultMaxProposalsPerTurn = 5
	DefaultShutdownGrace       = 5 * time.Second
	DefaultTextFlush           = 50 * time.Millisecond
	DefaultEffectTTL           = 10 * time.Minute
	DefaultProposalTTL         = 10 * time.Minute
	DefaultDenialMemory        = 10 * time.Minute
	DefaultFirstEventTimeout   = 30 * time.Second
	DefaultIdleTimeout         = 60 * time.Second
	DefaultAttemptTimeout      = 10 * time.Minute
	DefaultQueueRetryAfter     = time.Second
	DefaultClaimInterval       = 2 * time.Second
	DefaultRemoteCancelWait    = 5 * time.Second
	DefaultRemoteDecisionWait  = 30 * time.Second
	// DefaultMaxToolCallsPerAnswer and DefaultMaxEffectsPerTurn bound what
	// one model answer, and one turn, may ask of the tools and the cockpit.
	DefaultMaxToolCallsPerAnswer = 16
	DefaultMaxEffectsPerTurn     = 16
	// DefaultModelBudget is Config.ModelBudget's default.
	DefaultModelBudget = 5 * time.Minute
)

// Commands is what the proposal lifecycle needs of the application:
// preparing a model's command as a proposal, re-reading its target, and
// executing it once confirmed. *studio.Service implements it.
type Commands interface {
	Prepare(ctx context.Context, cmd studio.Command) (studio.Prepared, error)
	ResolveTarget(ctx context.Context, cmd studio.Command) (*protocol.ResourceVersion, error)
	Execute(ctx context.Context, cmd studio.Command, opts studio.ExecOptions) (studio.Result, error)
}

// Config wires a Coordinator. Store and Provider (or Models) are required;
// Commands is required for command tools to become proposals.
type Config struct {
	Store store.Store
	// Provider is the default model's provider. Models, when set, are the
	// models a conversation may choose; DefaultModel names the
	// default (else the first), and Provider defaults to its provider.
	Provider     model.Provider
	Models       []Model
	DefaultModel string
	Commands     Commands
	Now          func() time.Time
	Logger       *slog.Logger
	// Observer is told about turns, the queue, model attempts, proposal
	// decisions and effect acknowledgements (default: nothing).
	Observer Observer
	// Workers bounds the turns that talk to the model at once.
	Workers int
	// MaxQueuedTurns bounds the new turns waiting for a worker; past it a
	// submission is refused with rate_limited and nothing is created.
	MaxQueuedTurns int
	// QueueRetryAfter is the retryAfterMs of that refusal.
	QueueRetryAfter time.Duration
	// MaxToolRounds bounds model round trips per turn, across proposal
	// decisions.
	MaxToolRounds int
	// MaxProposalsPerTurn bounds the proposals one turn may make.
	MaxProposalsPerTurn int
	// MaxToolCallsPerAnswer bounds the tool calls run from one model
	// answer; MaxEffectsPerTurn the cockpit effects one turn may emit.
	// Past either, the call is answered with a typed tool result and
	// nothing runs (tools.go).
	MaxToolCallsPerAnswer int
	MaxEffectsPerTurn     int
	// ShutdownGrace is how long Shutdown lets running turns finish.
	ShutdownGrace time.Duration
	// TextFlush coalesces model text deltas into frames at most this often.
	TextFlush time.Duration
	// Tools is the tool registry offered to the model; nil offers none.
	Tools *tools.Registry
	// Routes validates effects and acknowledgements (default spaces.Default).
	Routes *spaces.Registry
	// EffectTTL is how long an emitted effect stays valid (default 10 minutes).
	EffectTTL time.Duration
	// ProposalTTL is how long a proposal waits for a human (default 10 minutes).
	ProposalTTL time.Duration
	// DenialMemory is how long a command a person denied is not proposed
	// again in its conversation, unless their own new instruction asks for
	// it (default 10 minutes; negative: not remembered).
	DenialMemory time.Duration
	// ModelRetries is how many times a retryable model failure is retried
	// (default 3; negative: never).
	ModelRetries int
	// RetryBackoff is the first retry's wait, doubled each time up to
	// MaxRetryBackoff; a provider's Retry-After hint is honoured up to
	// MaxRetryWait.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	MaxRetryWait    time.Duration
	// FirstEventTimeout, IdleTimeout and AttemptTimeout are the deadlines of
	// one model attempt: until its first event, between two events, and in
	// all. Each ends the attempt with a retryable model_failure.
	FirstEventTimeout time.Duration
	IdleTimeout       time.Duration
	AttemptTimeout    time.Duration
	// ModelBudget bounds the model time of one turn in all: its attempts
	// and the waits between retries, across rounds (this process's).
	ModelBudget time.Duration
	// EndRetryBackoff is the first wait before retrying a turn's end that
	// the store refused, doubled up to MaxEndRetryBackoff.
	EndRetryBackoff    time.Duration
	MaxEndRetryBackoff time.Duration
	// SweepInterval is how often due proposals and effects are expired;
	// zero disables the sweeper.
	SweepInterval time.Duration
	// Instance names this daemon in the store: it owns the turns it runs.
	// Default: a fresh id that no lease covers.
	Instance string
	// Shared says other daemons share the database (PostgreSQL; see the
	// package comment). Unset, the daemon holds it alone (SQLite): its
	// start ends every earlier process's unfinished work.
	Shared bool
	// ClaimInterval is how often an idle daemon looks for queued turns to
	// claim besides when it is told of one (Shared only).
	ClaimInterval time.Duration
	// RemoteCancelWait bounds how long a cancel of a turn that another
	// daemon runs waits for that daemon to end it before answering the
	// turn as it is (running, cancelRequestedAt set).
	RemoteCancelWait time.Duration
	// OutageBudget is how long a turn's writes are retried while the
	// database is unavailable before the turn fails (durable.go);
	// OutageBackoff the first wait between tries, doubled up to 2 s.
	OutageBudget  time.Duration
	OutageBackoff time.Duration
	// RemoteDecisionWait bounds how long a repeated confirm of a command
	// that another daemon executes waits for its outcome.
	RemoteDecisionWait time.Duration
	// CallTimeout bounds one database call (one try of a write, one read)
	// on a turn's paths: its appends, its proposals' transitions, a
	// confirmed command's execution, its end, and the reads of a decision.
	// A call on a connection that hangs fails after it and is retried
	// (durable.go), on another connection. Default 30 s; studio serve
	// derives it from the lease expiry on a shared database.
	CallTimeout time.Duration
	// PauseAt, when set, is called at the pause points of the daemon's
	// process tests (PauseRecordOutcome), inside the transaction there;
	// it returns when the test lets the daemon go on.
	PauseAt func(point string)
}

// PauseRecordOutcome is the pause point inside the transaction that
// records a confirmed command's outcome, after the command's own
// transaction committed, before this one's COMMIT (Config.PauseAt).
const PauseRecordOutcome = "record-outcome"

func (cfg *Config) defaults() {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	setDefault(&cfg.Workers, DefaultWorkers)
	setDefault(&cfg.MaxQueuedTurns, DefaultMaxQueuedTurns)
	setDefault(&cfg.MaxToolRounds, DefaultMaxToolRounds)
	setDefault(&cfg.MaxProposalsPerTurn, DefaultMaxProposalsPerTurn)
	setDefault(&cfg.MaxToolCallsPerAnswer, DefaultMaxToolCallsPerAnswer)
	setDefault(&cfg.MaxEffectsPerTurn, DefaultMaxEffectsPerTurn)
	setDefault(&cfg.QueueRetryAfter, DefaultQueueRetryAfter)
	setDefault(&cfg.ShutdownGrace, DefaultShutdownGrace)
	setDefault(&cfg.TextFlush, DefaultTextFlush)
	setDefault(&cfg.EffectTTL, DefaultEffectTTL)
	setDefault(&cfg.ProposalTTL, DefaultProposalTTL)
	if cfg.DenialMemory == 0 {
		cfg.DenialMemory = DefaultDenialMemory
	}
	setDefault(&cfg.RetryBackoff, 500*time.Millisecond)
	setDefault(&cfg.MaxRetryBackoff, 5*time.Second)
	setDefault(&cfg.MaxRetryWait, 30*time.Second)
	setDefault(&cfg.FirstEventTimeout, DefaultFirstEventTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	setDefault(&cfg.AttemptTimeout, DefaultAttemptTimeout)
	setDefault(&cfg.ModelBudget, DefaultModelBudget)
	setDefault(&cfg.EndRetryBackoff, 100*time.Millisecond)
	setDefault(&cfg.MaxEndRetryBackoff, 5*time.Second)
	setDefault(&cfg.ClaimInterval, DefaultClaimInterval)
	setDefault(&cfg.RemoteCancelWait, DefaultRemoteCancelWait)
	setDefault(&cfg.OutageBudget, DefaultOutageBudget)
	setDefault(&cfg.OutageBackoff, store.FirstOutageBackoff)
	setDefault(&cfg.RemoteDecisionWait, DefaultRemoteDecisionWait)
	setDefault(&cfg.CallTimeout, DefaultCallTimeout)
	if cfg.Instance == "" {
		cfg.Instance = uuid.NewString()
	}
	switch {
	case cfg.ModelRetries == 0:
		cfg.ModelRetries = 3
	case cfg.ModelRetries < 0:
		cfg.ModelRetries = 0
	}
	if cfg.Routes == nil {
		cfg.Routes = &spaces.Default
	}
	if cfg.Tools == nil {
		cfg.Tools = tools.NewRegistry()
	}
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Coordinator runs operator turns.
type Coordinator struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	obs   Observer
	now   func() time.Time
	pool  *pool

	// base is every owner's context: cancelled when the shutdown grace ends.
	base context.Context
	stop context.CancelCauseFunc
	// stopping closes when Shutdown begins: parked owners leave, queued
	// turns end, the sweeper stops. abandon closes when Shutdown's own
	// deadline passes: writes still being retried give up (recovery ends
	// those turns at the next start).
	stopping chan struct{}
	abandon  chan struct{}

	// life orders submissions and adoptions before Shutdown: they hold it
	// shared while they may start an owner.
	life   sync.RWMutex
	closed bool

	// progressed wakes readers of a conversation's turn progress (progress.go).
	progressed store.Signals
	stored     storedViews  // progress of turns other daemons own, as last read
	lines      waitingLines // turns waiting behind each conversation's active one (waiting.go)

	wg     sync.WaitGroup // owners and the sweeper
	mu     sync.Mutex
	owners map[string]*owner // request id -> its owner
	// unsure are turns whose takeover's commit went unanswered, to read
	// again at the reaper's next look (reaper.go).
	unsure map[string]store.Turn
	// lease is this daemon's lease (UseLease): what self-fencing asks.
	lease leaseRef
	onces

	models models
	views  *conversations.Views // the cockpit's live view reports
}

// Causes of an owner's context cancellation.
var errShutdown = errors.New("daemon shutting down")

// New returns a Coordinator; call Recover before serving.
func New(cfg Config) *Coordinator {
	cfg.defaults()
	ms := newModels(&cfg)
	base, stop := context.WithCancelCause(context.Background())
	if cfg.Shared {
		// Every write an owner makes is fenced by this daemon's instance:
		// once another daemon reaped it, its writes fail (store.Fence).
		base = store.WithFence(base, store.Fence{Instance: cfg.Instance})
	}
	c := &Coordinator{cfg: cfg, store: cfg.Store, log: cfg.Logger, obs: cfg.Observer, now: cfg.Now,
		base: base, stop: stop, stopping: make(chan struct{}), abandon: make(chan struct{}),
		owners: make(map[string]*owner), models: ms, views: conversations.NewViews()}
	c.pool = newPool(cfg.Workers, cfg.MaxQueuedTurns, cfg.Observer)
	c.pool.moved = c.progressed.NotifyAll // queue positions changed
	return c
}

// Routes is the route registry effects are validated against.
func (c *Coordinator) Routes() *spaces.Registry { return c.cfg.Routes }

// Tools is the tool registry offered to the model.
func (c *Coordinator) Tools() *tools.Registry { return c.cfg.Tools }

// call is ctx bounded by the deadline of one database call.
func (c *Coordinator) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}
