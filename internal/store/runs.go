package store

import (
	"context"
	"time"
)

// RunStatus is a run's state.
type RunStatus string

// Run states: queued -> running -> succeeded | failed | cancelled; a queued
// run may also be cancelled or failed directly.
const (
	RunQueued    RunStatus = "queued"
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// RunStatuses lists every state.
var RunStatuses = []RunStatus{RunQueued, RunRunning, RunSucceeded, RunFailed, RunCancelled}

// Terminal reports whether no transition leaves s.
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// RunTrigger says who launched a run.
type RunTrigger string

// Run triggers.
const (
	TriggerManual   RunTrigger = "manual"
	TriggerSchedule RunTrigger = "schedule"
	TriggerOperator RunTrigger = "operator"
)

// Run is a row of studio_runs. It keeps a copy of the playbook's name,
// version and prompt as they were at launch, so history survives edits and
// deletion of the playbook.
type Run struct {
	ID                string
	Project           string
	PlaybookID        string
	PlaybookName      string
	PlaybookVersion   int64
	Prompt            string
	Input             string
	Args              map[string]string
	Status            RunStatus
	Trigger           RunTrigger
	ScheduleID        *string
	RetryOf           *string
	WorkflowID        *string // the workflow launch this run is a step of
	WorkflowStep      *int    // its step (0-based), with WorkflowID
	Output            string
	OutputTruncated   bool
	ErrorCode         *string
	ErrorMessage      *string
	Version           int64
	CreatedAt         time.Time
	UpdatedAt         time.Time
	StartedAt         *time.Time
	EndedAt           *time.Time
	CancelRequestedAt *time.Time
	// Owner is the instance executing a running run ("" otherwise), and
	// Epoch how many times the owner changed (fence.go).
	Owner string
	Epoch int64
}

// RunStore keeps runs and their transitions. Each transition bumps the
// run's version.
type RunStore interface {
	// CreateRun queues a run of a playbook, copying its name, version and
	// prompt; its commit notifies RunsQueued. ExpectedPlaybookVersion (when not 0) pins the playbook version
	// the caller validated the args against. RetryOf names a failed or
	// cancelled run this one retries (conflict otherwise).
	CreateRun(ctx context.Context, p CreateRunParams) (Run, error)
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns pages runs newest first.
	ListRuns(ctx context.Context, p ListRunsParams) ([]Run, error)
	// ClaimRun moves the oldest queued run to running; ok is false when
	// none is queued. Two claimers never get the same run.
	ClaimRun(ctx context.Context, p ClaimRunParams) (run Run, ok bool, err error)
	// FinishRun ends a running run; any other state is conflict.
	FinishRun(ctx context.Context, p FinishRunParams) (Run, error)
	// CancelRun cancels a queued run at once and marks a running one
	// cancel-requested (repeating that changes nothing); a finished run is
	// conflict. Its commit notifies the run's control key.
	CancelRun(ctx context.Context, p CancelRunParams) (Run, error)
	// RecoverRuns fails every queued or running run with the given error:
	// what a restart does to work a previous process left behind.
	RecoverRuns(ctx context.Context, p RecoverRunsParams) ([]Run, error)
	// RunStats counts runs created in [Since, Until) by status, with the
	// median duration of those that started and ended.
	RunStats(ctx context.Context, p RunStatsParams) (RunStats, error)
	// SaveRunOutput records a running run's output so far (the run detail
	// shows it live). It does not bump the version: the run did not change
	// state. A run that is not running is conflict.
	SaveRunOutput(ctx context.Context, p SaveRunOutputParams) error
	// RunActivity counts the runs created in each of the buckets between
	// consecutive Edges, by status, and the spread of the durations of
	// those that ran.
	RunActivity(ctx context.Context, p RunActivityParams) (RunActivity, error)
}

// CreateRunParams queues one run.
type CreateRunParams struct {
	ID                      string
	Project                 string // "": the playbook's project
	PlaybookID              string
	ExpectedPlaybookVersion int64
	Input                   string
	Args                    map[string]string
	Trigger                 RunTrigger
	ScheduleID              *string
	RetryOf                 *string
	ExpectedRetryOfVersion  int64
	WorkflowID              *string
	WorkflowStep            *int
	Now                     time.Time
	Audit                   *AppendAdminEventParams
}

// ListRunsParams filters and pages runs, newest first. The cursor is the
// (CreatedAt, ID) of the previous page's last run.
type ListRunsParams struct {
	Status     RunStatus
	PlaybookID string
	Project    string
	Trigger    RunTrigger
	ScheduleID string
	WorkflowID string
	// Query matches the playbook's name or the input (case-insensitive
	// substring) or the id (prefix).
	Query string
	// IDPrefix keeps the runs whose id starts with it (lowercase hex and
	// dashes): what resolves the short ids lists and the CLI show.
	IDPrefix      string
	Since         *time.Time // created at or after
	Until         *time.Time // created before
	BeforeCreated *time.Time
	BeforeID      string
	Limit         int
}

// ClaimRunParams starts the oldest queued run, owned by Instance.
type ClaimRunParams struct {
	Now      time.Time
	Instance string
}

// FinishRunParams ends a running run. Status must be terminal.
type FinishRunParams struct {
	ID              string
	Status          RunStatus
	Output          string
	OutputTruncated bool
	ErrorCode       *string
	ErrorMessage    *string
	Now             time.Time
	// Instance, when set, must own the run (conflict otherwise).
	Instance string
}

// CancelRunParams asks for a run's cancellation.
type CancelRunParams struct {
	ID              string
	ExpectedVersion int64
	Now             time.Time
	Audit           *AppendAdminEventParams
}

// RecoverRunsParams fails the runs a previous process left unfinished.
type RecoverRunsParams struct {
	ErrorCode    string
	ErrorMessage string
	Now          time.Time
}

// RunStatsParams is the window of RunStats.
type RunStatsParams struct {
	Since time.Time
	Until time.Time
	// Optional filters, as ListRunsParams's.
	PlaybookID string
	Trigger    RunTrigger
	Query      string
}

// RunStats counts runs by status.
type RunStats struct {
	Counts map[RunStatus]int64
	Total  int64
	// MedianDuration is over runs that started and ended; nil when none did.
	MedianDuration *time.Duration
}
