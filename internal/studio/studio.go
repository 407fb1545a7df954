// Package studio owns Studio's application services (docs/design.md §14): the
// playbooks, workflows, runs and schedules an operator of a Studio works
// with, and the system's health and maintenance. It offers queries with
// filters and cursor paging, and typed commands — each with a stable type
// id, strict decoding, a canonical JSON form, a resolver naming its target
// {kind, id, version}, a human summary, and execution in one store
// transaction. It runs playbooks through the configured model provider on a
// bounded worker pool, and launches due schedules exactly once.
//
// The cockpit calls it over /api/app (package httpapi) and the operator
// reaches it only through typed tools; neither touches the store directly.
package studio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Defaults of Config fields left zero.
const (
	DefaultWorkers           = 4
	DefaultRunTimeout        = 10 * time.Minute
	DefaultMaxOutputBytes    = 64 << 10
	DefaultRecoveryWindow    = 7 * 24 * time.Hour
	DefaultShutdownGrace     = 5 * time.Second
	DefaultSchedulerInterval = 15 * time.Second
	DefaultClaimInterval     = 2 * time.Second
)

// Audit actors: who a command was executed for. Nothing from model output
// ever becomes one (docs/design.md §16).
const (
	ActorCockpit   = "studio_cockpit"
	ActorCLI       = "studio_cli" // a person at the command line (studio runs, playbooks, ...)
	ActorOperator  = "studio_operator"
	ActorScheduler = "studio_scheduler"
	ActorSystem    = "studio_system"
)

// Audit actions this package appends to admin_events.
const (
	ActionCommand         = "studio.app.command"
	ActionScheduleSkipped = "studio.schedule.skipped"
	ActionSeeded          = "studio.app.seeded"
)

// Config wires a Service. Store is required.
type Config struct {
	Store store.Store
	// Provider runs playbooks. Nil: every run fails saying no model is
	// configured; the rest of the application works.
	Provider model.Provider
	// OtherModels are the models conversations may choose besides the
	// default (Provider), by name: Doctor checks each that can check
	// itself.
	OtherModels []NamedModel
	// Maintenance is the backend's upkeep (vacuum, checkpoint, integrity,
	// file sizes). Nil: the backend has none (PostgreSQL), and those
	// actions and checks say so.
	Maintenance Maintenance
	Now         func() time.Time
	Logger      *slog.Logger
	// Workers bounds the runs that execute at once.
	Workers int
	// RunTimeout bounds one run: nothing stays running forever.
	RunTimeout time.Duration
	// MaxOutputBytes bounds a run's stored output; longer output is cut
	// and marked truncated.
	MaxOutputBytes int
	// OutputFlushInterval and OutputFlushBytes bound how often a running
	// run's partial output is saved (output.go).
	OutputFlushInterval time.Duration
	OutputFlushBytes    int
	// SchedulerInterval is how often the scheduler looks for due schedules.
	// Zero disables the loop (tests call Tick).
	SchedulerInterval time.Duration
	// MissedGrace is how late a due slot may still launch; older slots were
	// missed and are skipped. Default: the larger of a minute and two
	// scheduler intervals.
	MissedGrace time.Duration
	// RecoveryWindow is how long a deleted conversation stays recoverable
	// before purge_deleted_conversations may remove it.
	RecoveryWindow time.Duration
	// ShutdownGrace is how long Stop lets running runs finish.
	ShutdownGrace time.Duration
	// Observer is told about runs and scheduler passes (metrics); nil
	// observes nothing.
	Observer Observer
	// Instance names this daemon in the store: it owns the runs it
	// executes. Default: a fresh id that no lease covers.
	Instance string
	// Shared says other daemons share the database: every daemon's idle
	// workers claim queued runs, a cancel recorded by any daemon reaches
	// the one executing the run, and Start leaves the runs of other
	// daemons alone (a dead daemon's are failed by the lease reaper,
	// ReapOrphans). Unset, Start fails every run an earlier process left
	// queued or running.
	Shared bool
	// ClaimInterval is how often idle workers look for queued runs besides
	// when told of one (Shared only).
	ClaimInterval time.Duration
	// Lease describes this daemon's lease, for doctor.
	Lease LeaseSettings
	// OutageBudget is how long a run's end is retried while the database
	// is unavailable (a restart, a failover) before it is given up to the
	// reaper (default DefaultOutageBudget).
	OutageBudget time.Duration
	// Retention removes conversations not used for this long (not pinned,
	// no active turn; retention.go). Zero keeps them for ever.
	Retention time.Duration
	// RetentionInterval is how often the retention pass runs (default
	// DefaultRetentionInterval). Negative: never by itself (tests call
	// ApplyRetention).
	RetentionInterval time.Duration
}

// DefaultOutageBudget is Config.OutageBudget's default.
const DefaultOutageBudget = 60 * time.Second

// LeaseSettings are the lease flags of a daemon (zero: no lease kept).
type LeaseSettings struct {
	Renew  time.Duration
	Expiry time.Duration
}

// Observer is what the executor and the scheduler report as they work.
// Its methods must return quickly and never fail the work.
type Observer interface {
	// RunStarted is called when a run begins executing; ended is called
	// when it stops executing, before RunFinished.
	RunStarted() (ended func())
	// RunFinished reports a run's final status and how long it executed.
	RunFinished(status string, d time.Duration)
	// ScheduleFired reports a schedule pass that launched a slot lag after
	// its due time (negative: no launch) and skipped slots that were missed.
	ScheduleFired(lag time.Duration, skipped int64)
}

// noObserver observes nothing.
type noObserver struct{}

func (noObserver) RunStarted() func()                 { return func() {} }
func (noObserver) RunFinished(string, time.Duration)  {}
func (noObserver) ScheduleFired(time.Duration, int64) {}

// Service is the application. Queries and commands are safe for concurrent
// use; Start and Stop run the executor and the scheduler.
type Service struct {
	cfg      Config
	store    store.Store
	provider model.Provider
	maint    Maintenance
	now      func() time.Time
	log      *slog.Logger

	queued  store.Signals // key queuedKey: a run was queued
	changed store.Signals // key run id: the run changed in this process

	mu      sync.Mutex
	started bool
	stopped bool
	active  map[string]context.CancelCauseFunc // run id -> cancel of its model call
	base    context.Context
	kill    context.CancelCauseFunc
	quit    chan struct{}  // closed by Stop: claim no more runs
	wg      sync.WaitGroup // workers and the scheduler loop

	proposals ProposalSettler // reconcile_proposal's (SettleProposalsWith)
}

const queuedKey = "queued"

// Causes of a run's cancellation.
var (
	errCancelRequested = errors.New("cancel requested")
	errShutdown        = errors.New("daemon shutting down")
	errRunTimeout      = errors.New("run timed out")
)

// New returns a Service. It starts nothing: call Start to run the executor
// and the scheduler.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("app: a store is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = DefaultRunTimeout
	}
	if cfg.OutputFlushInterval <= 0 {
		cfg.OutputFlushInterval = DefaultOutputFlushInterval
	}
	if cfg.OutputFlushBytes <= 0 {
		cfg.OutputFlushBytes = DefaultOutputFlushBytes
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.SchedulerInterval < 0 {
		cfg.SchedulerInterval = 0
	}
	if cfg.MissedGrace <= 0 {
		cfg.MissedGrace = max(time.Minute, 2*cfg.SchedulerInterval)
	}
	if cfg.RecoveryWindow <= 0 {
		cfg.RecoveryWindow = DefaultRecoveryWindow
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.ClaimInterval <= 0 {
		cfg.ClaimInterval = DefaultClaimInterval
	}
	if cfg.RetentionInterval == 0 {
		cfg.RetentionInterval = DefaultRetentionInterval
	}
	if cfg.Instance == "" {
		cfg.Instance = uuid.NewString()
	}
	if cfg.OutageBudget <= 0 {
		cfg.OutageBudget = DefaultOutageBudget
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	base, kill := context.WithCancelCause(context.Background())
	if cfg.Shared {
		// Every write of the runs this daemon executes is fenced by its
		// instance: once another daemon reaped it, they fail.
		base = store.WithFence(base, store.Fence{Instance: cfg.Instance})
	}
	return &Service{
		cfg: cfg, store: cfg.Store, provider: redactedProvider(cfg.Provider), maint: cfg.Maintenance,
		now: func() time.Time { return cfg.Now().UTC() }, log: cfg.Logger,
		active: make(map[string]context.CancelCauseFunc), base: base, kill: kill, quit: make(chan struct{}),
	}, nil
}

// redactedProvider is p with everything it writes (a run's output, its
// error) passing the redactor before it is stored; nil stays nil.
func redactedProvider(p model.Provider) model.Provider {
	if p == nil {
		return nil
	}
	return model.Redacting(p)
}

// ProviderName names the configured model provider, "" when none is.
func (s *Service) ProviderName() string {
	if s.provider == nil {
		return ""
	}
	return s.provider.Name()
}

// Start fails the runs a previous process left queued or running (their
// error says the daemon restarted) unless the database is Shared, then
// starts the run workers and, when an interval is configured, the
// scheduler loop.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.stopped {
		s.mu.Unlock()
		return errors.New("app: service already started or stopped")
	}
	s.started = true
	s.mu.Unlock()
	if !s.cfg.Shared {
		recovered, err := s.store.RecoverRuns(ctx, store.RecoverRunsParams{
			ErrorCode:    string(protocol.ServiceRestarted),
			ErrorMessage: "the daemon restarted before this run finished; it did not complete",
			Now:          s.now(),
		})
		if err != nil {
			return fmt.Errorf("recover runs: %w", err)
		}
		for _, r := range recovered {
			s.log.Warn("failed run interrupted by restart", "run", r.ID, "playbook", r.PlaybookName)
		}
	}
	for range s.cfg.Workers {
		s.wg.Add(1)
		go s.worker()
	}
	if s.cfg.SchedulerInterval > 0 {
		s.wg.Add(1)
		go s.schedulerLoop()
	}
	if s.cfg.Retention > 0 && s.cfg.RetentionInterval > 0 {
		s.wg.Add(1)
		go s.retentionLoop()
	}
	return nil
}

// Stop stops claiming runs and the scheduler, lets running runs finish for
// the shutdown grace (or until ctx ends), then cancels the rest — they fail
// saying the daemon shut down — and waits for every goroutine. Call it
// before closing the store.
func (s *Service) Stop(ctx context.Context) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	started := s.started
	s.mu.Unlock()
	close(s.quit)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	if started {
		grace := time.NewTimer(s.cfg.ShutdownGrace)
		select {
		case <-done:
		case <-grace.C:
		case <-ctx.Done():
		}
		grace.Stop()
	}
	s.kill(errShutdown)
	<-done
}

// RunsInFlight is how many runs this process executes now.
func (s *Service) RunsInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

func (s *Service) stopping() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}
