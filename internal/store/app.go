package store

import "context"

// AppStore keeps the Studio application's resources (docs/design.md §14):
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
