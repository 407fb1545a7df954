package store

import (
	"context"
	"time"
)

// AppStore keeps the Studio application's resources (DESIGN.md §11):
// playbooks, workflows, runs and schedules, plus the retention and
// diagnostics that maintenance and doctor need.
//
// Every resource has an integer version, 1 on creation and bumped by each
// change. Update and delete take ExpectedVersion: when it is not 0 and does
// not match, the answer is conflict with details expectedVersion and
// actualVersion. An unknown id is not_found. A mutating call that carries an
// Audit row appends it to admin_events in the same transaction as the change:
// both happen or neither does.
type AppStore interface {
	PlaybookStore
	WorkflowStore
	RunStore
	ScheduleStore
	RetentionStore
	AppChangeStore

	// Diagnostics counts the work in flight, for doctor.
	Diagnostics(ctx context.Context, p DiagnosticsParams) (Diagnostics, error)
}

// DefaultProject is the project of resources created without one.
const DefaultProject = "default"

// Resource kinds, as they appear in a target {kind, id, version}.
const (
	KindPlaybook = "playbook"
	KindWorkflow = "workflow"
	KindRun      = "run"
	KindSchedule = "schedule"
)

// --- playbooks ---------------------------------------------------------------

// Playbook is a row of studio_playbooks: a named prompt with declared args.
type Playbook struct {
	ID          string
	Project     string
	Name        string
	Description string
	Prompt      string
	Args        []PlaybookArg
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// PlaybookArg is one declared argument of a playbook. It is stored as JSON.
type PlaybookArg struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Default     *string `json:"default,omitempty"`
}

// PlaybookStore keeps playbooks. Names are unique: a duplicate is conflict.
type PlaybookStore interface {
	CreatePlaybook(ctx context.Context, p CreatePlaybookParams) (Playbook, error)
	GetPlaybook(ctx context.Context, id string) (Playbook, error)
	GetPlaybookByName(ctx context.Context, name string) (Playbook, error)
	// ListPlaybooks pages playbooks by name, ascending.
	ListPlaybooks(ctx context.Context, p ListPlaybooksParams) ([]Playbook, error)
	UpdatePlaybook(ctx context.Context, p UpdatePlaybookParams) (Playbook, error)
	// DeletePlaybook removes a playbook and returns the removed row. A
	// playbook that a workflow step or a schedule uses is conflict (details
	// usedBy); runs keep their own copy of what they ran.
	DeletePlaybook(ctx context.Context, p DeletePlaybookParams) (Playbook, error)
}

// CreatePlaybookParams creates a playbook at version 1.
type CreatePlaybookParams struct {
	ID          string
	Project     string
	Name        string
	Description string
	Prompt      string
	Args        []PlaybookArg
	Now         time.Time
	Audit       *AppendAdminEventParams
}

// ListPlaybooksParams filters and pages playbooks. Query matches name or
// description, case-insensitively. AfterName is the previous page's last name.
type ListPlaybooksParams struct {
	Project   string
	Query     string
	AfterName string
	Limit     int
}

// UpdatePlaybookParams changes the fields that are set.
type UpdatePlaybookParams struct {
	ID              string
	ExpectedVersion int64
	Name            *string
	Description     *string
	Prompt          *string
	Args            *[]PlaybookArg
	Now             time.Time
	Audit           *AppendAdminEventParams
}

// DeletePlaybookParams removes a playbook.
type DeletePlaybookParams struct {
	ID              string
	ExpectedVersion int64
	Audit           *AppendAdminEventParams
}

// --- workflows ---------------------------------------------------------------

// Workflow is a row of studio_workflows with its ordered steps.
type Workflow struct {
	ID          string
	Project     string
	Name        string
	Description string
	Steps       []WorkflowStep
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// WorkflowStep runs one playbook. PlaybookName is filled on reads.
type WorkflowStep struct {
	PlaybookID   string
	PlaybookName string
	Input        string
	Args         map[string]string
}

// WorkflowStore keeps workflows. Names are unique; a step naming an unknown
// playbook is not_found.
type WorkflowStore interface {
	CreateWorkflow(ctx context.Context, p CreateWorkflowParams) (Workflow, error)
	GetWorkflow(ctx context.Context, id string) (Workflow, error)
	GetWorkflowByName(ctx context.Context, name string) (Workflow, error)
	// ListWorkflows pages workflows by name, ascending.
	ListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]Workflow, error)
	// UpdateWorkflow changes the fields that are set; Steps replaces all steps.
	UpdateWorkflow(ctx context.Context, p UpdateWorkflowParams) (Workflow, error)
	// DeleteWorkflow removes a workflow and its steps (its runs stay) and
	// returns it as it was.
	DeleteWorkflow(ctx context.Context, p DeleteWorkflowParams) (Workflow, error)
	// LaunchWorkflow queues one run per step of the workflow at
	// ExpectedVersion, in step order, each recording the workflow and its
	// step, with one audit row: all of them or none.
	LaunchWorkflow(ctx context.Context, p LaunchWorkflowParams) ([]Run, error)
}

// CreateWorkflowParams creates a workflow at version 1.
type CreateWorkflowParams struct {
	ID          string
	Project     string
	Name        string
	Description string
	Steps       []WorkflowStep
	Now         time.Time
	Audit       *AppendAdminEventParams
}

// ListWorkflowsParams filters and pages workflows (as ListPlaybooksParams).
type ListWorkflowsParams struct {
	Project   string
	Query     string
	AfterName string
	Limit     int
}

// UpdateWorkflowParams changes the fields that are set.
type UpdateWorkflowParams struct {
	ID              string
	ExpectedVersion int64
	Name            *string
	Description     *string
	Steps           *[]WorkflowStep
	Now             time.Time
	Audit           *AppendAdminEventParams
}

// --- runs --------------------------------------------------------------------

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
	Query         string
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

// --- schedules ---------------------------------------------------------------

// Schedule is a row of studio_schedules. NextRunAt is nil while disabled.
// Its version counts configuration changes only: the scheduler's bookkeeping
// (last/next run, skips) does not bump it, so a proposal to change a schedule
// stays valid while the schedule fires.
type Schedule struct {
	ID            string
	Project       string
	Name          string
	Cron          string
	PlaybookID    string
	PlaybookName  string
	Input         string
	Args          map[string]string
	Enabled       bool
	NextRunAt     *time.Time
	LastRunAt     *time.Time
	LastRunID     *string
	SkippedRuns   int64
	LastSkippedAt *time.Time
	Version       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// ScheduleStore keeps schedules and claims their due slots.
type ScheduleStore interface {
	CreateSchedule(ctx context.Context, p CreateScheduleParams) (Schedule, error)
	GetSchedule(ctx context.Context, id string) (Schedule, error)
	GetScheduleByName(ctx context.Context, name string) (Schedule, error)
	// ListSchedules pages schedules by name, ascending.
	ListSchedules(ctx context.Context, p ListSchedulesParams) ([]Schedule, error)
	// UpdateSchedule changes the fields that are set.
	UpdateSchedule(ctx context.Context, p UpdateScheduleParams) (Schedule, error)
	DeleteSchedule(ctx context.Context, p DeleteScheduleParams) (Schedule, error)
	// DueSchedules lists enabled schedules whose next run is at or before Now.
	DueSchedules(ctx context.Context, p DueSchedulesParams) ([]Schedule, error)
	// FireSchedule handles one due schedule in one transaction: a
	// compare-and-set of next_run_at from DueAt, a claim row per handled
	// slot (unique per schedule and slot), the launched run and the skip
	// record. Another scheduler that handled the slot first makes it conflict:
	// every slot is launched or skipped exactly once.
	FireSchedule(ctx context.Context, p FireScheduleParams) (FireScheduleResult, error)
}

// CreateScheduleParams creates a schedule at version 1.
type CreateScheduleParams struct {
	ID         string
	Project    string
	Name       string
	Cron       string
	PlaybookID string
	Input      string
	Args       map[string]string
	Enabled    bool
	NextRunAt  *time.Time
	Now        time.Time
	Audit      *AppendAdminEventParams
}

// ListSchedulesParams filters and pages schedules.
type ListSchedulesParams struct {
	Enabled    *bool
	PlaybookID string
	Query      string
	AfterName  string
	Limit      int
}

// UpdateScheduleParams changes the fields that are set. NextRunAt is written
// when SetNextRunAt is true (nil clears it).
type UpdateScheduleParams struct {
	ID              string
	ExpectedVersion int64
	Name            *string
	Cron            *string
	PlaybookID      *string
	Input           *string
	Args            *map[string]string
	Enabled         *bool
	SetNextRunAt    bool
	NextRunAt       *time.Time
	Now             time.Time
	Audit           *AppendAdminEventParams
}

// DeleteScheduleParams removes a schedule (its runs stay).
type DeleteScheduleParams struct {
	ID              string
	ExpectedVersion int64
	Audit           *AppendAdminEventParams
}

// DueSchedulesParams lists due schedules.
type DueSchedulesParams struct {
	Now   time.Time
	Limit int
}

// FireScheduleParams handles the due slots of one schedule. Launch is nil
// when every due slot was missed. Skipped counts the missed slots, from
// SkippedFrom to SkippedTo; SkipEvent records them in admin_events.
type FireScheduleParams struct {
	ScheduleID  string
	DueAt       time.Time
	NextRunAt   time.Time
	Launch      *CreateRunParams
	LaunchedFor time.Time
	Skipped     int64
	SkippedFrom time.Time
	SkippedTo   time.Time
	SkipEvent   *AppendAdminEventParams
	Now         time.Time
}

// FireScheduleResult is the schedule after firing and the run it launched.
type FireScheduleResult struct {
	Schedule Schedule
	Run      *Run
}

// --- retention and diagnostics ----------------------------------------------

// RetentionStore removes operator data on an administrator's request.
type RetentionStore interface {
	// PurgeFrames deletes a conversation's frames with sequence below
	// BeforeSequence and records the earliest retained sequence, so that
	// replay from an older cursor is a replay_gap; it wakes the
	// conversation's streams. BeforeSequence may be at most the next
	// sequence. Refused (conflict) while a turn is active.
	PurgeFrames(ctx context.Context, p PurgeFramesParams) (PurgeFramesResult, error)
	// PurgeDeletedConversations removes conversations deleted before the
	// cutoff with every dependent row (turns, frames, proposals, effects,
	// stream tickets). admin_events, append-only, keep their rows.
	PurgeDeletedConversations(ctx context.Context, p PurgeDeletedConversationsParams) (PurgeDeletedConversationsResult, error)
	// PurgeIdleConversations removes, the same way, the conversations not
	// used (no turn, frame or change) since UnusedBefore that are not
	// pinned, not deleted (PurgeDeletedConversations has those) and have
	// no active turn: the deployment's retention. Streams of this process
	// following a removed conversation end with replay_gap.
	PurgeIdleConversations(ctx context.Context, p PurgeIdleConversationsParams) (PurgeDeletedConversationsResult, error)
	// CountIdleConversations counts what PurgeIdleConversations would
	// remove with the same cutoff.
	CountIdleConversations(ctx context.Context, unusedBefore time.Time) (int64, error)
}

// PurgeIdleConversationsParams is the retention cutoff.
type PurgeIdleConversationsParams struct {
	UnusedBefore time.Time
	Audit        *AppendAdminEventParams
}

// PurgeFramesParams purges one conversation's older frames.
type PurgeFramesParams struct {
	ConversationID string
	BeforeSequence int64
	Now            time.Time
	Audit          *AppendAdminEventParams
}

// PurgeFramesResult counts what went and what stays.
type PurgeFramesResult struct {
	Purged       int64
	RetainedFrom int64
}

// PurgeDeletedConversationsParams is the recovery-window cutoff.
type PurgeDeletedConversationsParams struct {
	DeletedBefore time.Time
	Audit         *AppendAdminEventParams
}

// PurgeDeletedConversationsResult counts the removed rows.
type PurgeDeletedConversationsResult struct {
	IDs           []string // the removed conversations
	Conversations int64
	Turns         int64
	Frames        int64
	Proposals     int64
	Effects       int64
	Tickets       int64
}

// DiagnosticsParams bounds the listed proposals.
type DiagnosticsParams struct {
	ProposalLimit int
}

// Diagnostics is the work in flight.
type Diagnostics struct {
	RunsQueued       int64
	RunsRunning      int64
	TurnsQueued      int64
	TurnsRunning     int64
	TurnsAwaiting    int64
	EnabledSchedules int64
	// ExecutingProposals are proposals left executing: their outcome is
	// indeterminate until an administrator reconciles them (DESIGN.md §8).
	ExecutingProposals      []ExecutingProposal
	ExecutingProposalsTotal int64
}

// ExecutingProposal is one indeterminate proposal.
type ExecutingProposal struct {
	ID             string
	ConversationID string
	RequestID      string
	CommandType    string
	Summary        string
	CreatedAt      time.Time
	ConfirmedAt    *time.Time
}
