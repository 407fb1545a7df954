package studio

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// Maintenance is the upkeep a database backend offers beyond store.Store:
// *sqlite.Store implements it. It stays out of store.Store because it is
// specific to a file-backed engine.
type Maintenance interface {
	// Vacuum rebuilds the database file.
	Vacuum(ctx context.Context) error
	// Checkpoint folds the write-ahead log into the database; busy means
	// readers kept part of it.
	Checkpoint(ctx context.Context) (busy bool, err error)
	// IntegrityCheck returns the problems a quick or full check finds.
	IntegrityCheck(ctx context.Context, quick bool) ([]string, error)
	// DatabaseFiles names the database file (base name only) and sizes it
	// and its write-ahead log.
	DatabaseFiles() (name string, dbBytes, walBytes int64, err error)
	// FreeSpace is the space available on the data directory's file system.
	FreeSpace() (int64, error)
}

// Doctor's thresholds.
const (
	lowFreeSpace = 256 << 20
	largeWAL     = 256 << 20
)

// Doctor statuses.
const (
	StatusOK       = "ok"
	StatusDegraded = "degraded"
	StatusFailing  = "failing"
)

// DoctorReport is the system's health. It names the database file only by
// its base name: no host path appears in it.
type DoctorReport struct {
	Status    string          `json:"status"`
	CheckedAt float64         `json:"checkedAt"`
	Database  DatabaseReport  `json:"database"`
	Model     ModelReport     `json:"model"`
	Runs      RunsReport      `json:"runs"`
	Schedules SchedulesReport `json:"schedules"`
	Operator  OperatorReport  `json:"operator"`
	Cluster   ClusterReport   `json:"cluster"`
	Problems  []string        `json:"problems"`
}

// DatabaseReport is StateDB's health.
type DatabaseReport struct {
	File          string   `json:"file,omitempty"`
	SchemaVersion int      `json:"schemaVersion"`
	QuickCheck    string   `json:"quickCheck"` // ok | failed | unavailable
	Problems      []string `json:"problems,omitempty"`
	SizeBytes     *int64   `json:"sizeBytes"`
	WALBytes      *int64   `json:"walBytes"`
	FreeBytes     *int64   `json:"freeBytes"`
	// Retention is the deployment's retention and what it would remove
	// now; absent when conversations are kept for ever.
	Retention *RetentionReport `json:"retention,omitzero"`
}

// NamedModel is a configured model besides the default, for Doctor.
type NamedModel struct {
	Name     string
	Provider model.Provider
}

// ModelReport is the configured model provider.
type ModelReport struct {
	Provider   string `json:"provider"`
	Configured bool   `json:"configured"`
	Healthy    *bool  `json:"healthy,omitzero"` // providers that can check themselves
	Error      string `json:"error,omitempty"`
}

// RunsReport is the executor's work.
type RunsReport struct {
	Queued  int64 `json:"queued"`
	Running int64 `json:"running"`
	Workers int   `json:"workers"`
}

// SchedulesReport is the scheduler's state.
type SchedulesReport struct {
	Enabled          int64 `json:"enabled"`
	SchedulerRunning bool  `json:"schedulerRunning"`
}

// OperatorReport is the operator protocol's work in flight.
type OperatorReport struct {
	TurnsQueued               int64                   `json:"turnsQueued"`
	TurnsRunning              int64                   `json:"turnsRunning"`
	TurnsAwaitingConfirmation int64                   `json:"turnsAwaitingConfirmation"`
	IndeterminateProposals    []IndeterminateProposal `json:"indeterminateProposals"`
	IndeterminateTotal        int64                   `json:"indeterminateTotal"`
}

// IndeterminateProposal is a proposal left executing: its command may or
// may not have applied, and an administrator must reconcile it.
type IndeterminateProposal struct {
	ID             string   `json:"id"`
	ConversationID string   `json:"conversationId"`
	RequestID      string   `json:"requestId"`
	CommandType    string   `json:"commandType"`
	Summary        string   `json:"summary"`
	CreatedAt      float64  `json:"createdAt"`
	ConfirmedAt    *float64 `json:"confirmedAt"`
	// ExecutedAt is its execution marker (store.ExecutingProposal): set,
	// the command ran, and a daemon on a shared database records it so by
	// itself; unset, reconcile_proposal settles it.
	ExecutedAt *float64 `json:"executedAt"`
}

// modelFailure is a model whose check failed.
type modelFailure struct {
	name string
	err  error
}

// checkOtherModels checks the models besides the default at once, each
// within 5 s, and returns those that failed, in the configured order.
func (s *Service) checkOtherModels(ctx context.Context) []modelFailure {
	errs := make([]error, len(s.cfg.OtherModels))
	var wg sync.WaitGroup
	for i, m := range s.cfg.OtherModels {
		ch, ok := m.Provider.(model.Checker)
		if !ok {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			errs[i] = ch.Check(cctx)
		})
	}
	wg.Wait()
	var out []modelFailure
	for i, err := range errs {
		if err != nil {
			out = append(out, modelFailure{s.cfg.OtherModels[i].Name, err})
		}
	}
	return out
}

// DoctorWork is the part of the doctor's report a live view reads again
// on every change: the work in flight (runs, schedules, the operator's
// turns and proposals), without the checks that read the whole database
// or call the model. Its status says only whether the counts were read.
func (s *Service) DoctorWork(ctx context.Context) (DoctorReport, error) {
	r := DoctorReport{CheckedAt: stamp(s.now()), Problems: []string{},
		Operator: OperatorReport{IndeterminateProposals: []IndeterminateProposal{}}}
	r.Status = StatusOK
	s.countWork(ctx, &r, func(fail bool, format string, args ...any) {
		r.Problems = append(r.Problems, redact.Text(fmt.Sprintf(format, args...)))
		if fail {
			r.Status = StatusFailing
		} else if r.Status == StatusOK {
			r.Status = StatusDegraded
		}
	})
	s.mu.Lock()
	r.Schedules.SchedulerRunning = s.started && !s.stopped && s.cfg.SchedulerInterval > 0
	s.mu.Unlock()
	return r, nil
}

// countWork fills in the work in flight.
func (s *Service) countWork(ctx context.Context, r *DoctorReport, problem func(fail bool, format string, args ...any)) {
	d, err := s.store.Diagnostics(ctx, store.DiagnosticsParams{ProposalLimit: 20})
	if err != nil {
		problem(true, "the work in flight cannot be counted: %v", err)
	} else {
		r.Runs = RunsReport{Queued: d.RunsQueued, Running: d.RunsRunning, Workers: s.cfg.Workers}
		r.Schedules.Enabled = d.EnabledSchedules
		r.Operator.TurnsQueued, r.Operator.TurnsRunning, r.Operator.TurnsAwaitingConfirmation = d.TurnsQueued, d.TurnsRunning, d.TurnsAwaiting
		r.Operator.IndeterminateTotal = d.ExecutingProposalsTotal
		for _, p := range d.ExecutingProposals {
			if !s.conversationVisible(ctx, p.ConversationID) {
				continue // another principal's private conversation's
			}
			r.Operator.IndeterminateProposals = append(r.Operator.IndeterminateProposals, IndeterminateProposal{
				ID: p.ID, ConversationID: p.ConversationID, RequestID: p.RequestID, CommandType: p.CommandType,
				Summary: p.Summary, CreatedAt: stamp(p.CreatedAt), ConfirmedAt: stampPtr(p.ConfirmedAt), ExecutedAt: stampPtr(p.ExecutedAt)})
		}
		if d.ExecutingProposalsTotal > 0 {
			problem(false, "%d operator proposals are indeterminate (left executing); reconcile them", d.ExecutingProposalsTotal)
		}
	}
}

// Doctor checks the database (quick check, schema version, file and WAL
// sizes, free space), the model provider, and the work in flight. A check
// that fails is reported, not returned as an error.
func (s *Service) Doctor(ctx context.Context) (DoctorReport, error) {
	r := DoctorReport{CheckedAt: stamp(s.now()), Problems: []string{},
		Operator: OperatorReport{IndeterminateProposals: []IndeterminateProposal{}}}
	failing, degraded := false, false
	problem := func(fail bool, format string, args ...any) {
		r.Problems = append(r.Problems, redact.Text(fmt.Sprintf(format, args...)))
		if fail {
			failing = true
		} else {
			degraded = true
		}
	}

	if v, err := s.store.SchemaVersion(ctx); err != nil {
		problem(true, "the database schema version cannot be read: %v", err)
	} else {
		r.Database.SchemaVersion = v
	}
	if rr, err := s.retentionReport(ctx); err != nil {
		problem(false, "what retention would remove cannot be counted: %v", err)
	} else {
		r.Database.Retention = rr
	}
	r.Database.QuickCheck = "unavailable"
	if s.maint != nil {
		if problems, err := s.maint.IntegrityCheck(ctx, true); err != nil {
			r.Database.QuickCheck = "failed"
			problem(true, "the database quick check could not run: %v", err)
		} else if len(problems) > 0 {
			r.Database.QuickCheck, r.Database.Problems = "failed", problems
			problem(true, "the database quick check found %d problems; run maintenance integrity_check and restore from a backup", len(problems))
		} else {
			r.Database.QuickCheck = "ok"
		}
		if name, db, wal, err := s.maint.DatabaseFiles(); err != nil {
			problem(false, "the database file cannot be measured: %v", err)
		} else {
			r.Database.File, r.Database.SizeBytes, r.Database.WALBytes = name, &db, &wal
			if wal > largeWAL {
				problem(false, "the write-ahead log is %d MiB; run maintenance checkpoint", wal>>20)
			}
		}
		if free, err := s.maint.FreeSpace(); err != nil {
			problem(false, "the data directory's free space is unknown: %v", err)
		} else {
			r.Database.FreeBytes = &free
			if free < lowFreeSpace {
				problem(false, "only %d MiB free in the data directory", free>>20)
			}
		}
	}

	r.Model.Provider = s.ProviderName()
	r.Model.Configured = s.provider != nil
	if s.provider == nil {
		problem(false, "no model provider is configured; runs fail until one is")
	} else if ch, ok := s.provider.(model.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ch.Check(cctx)
		cancel()
		healthy := err == nil
		r.Model.Healthy = &healthy
		if err != nil {
			r.Model.Error = redact.Text(err.Error())
			problem(false, "the model provider %s is not answering: %v", r.Model.Provider, err)
		}
	}

	for _, bad := range s.checkOtherModels(ctx) {
		problem(false, "the model %s is not answering: %v", bad.name, bad.err)
	}

	s.countWork(ctx, &r, problem)
	r.Cluster = s.cluster(ctx, problem)
	s.mu.Lock()
	r.Schedules.SchedulerRunning = s.started && !s.stopped && s.cfg.SchedulerInterval > 0
	s.mu.Unlock()

	switch {
	case failing:
		r.Status = StatusFailing
	case degraded:
		r.Status = StatusDegraded
	default:
		r.Status = StatusOK
	}
	return r, nil
}
