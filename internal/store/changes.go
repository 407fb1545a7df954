package store

import (
	"context"
	"time"
)

// Application change types: what GET /api/app/events streams. A change
// names the resource; a client reads the resource itself, through the
// same checks as any read (the stream carries ids, never data).
const (
	ChangeRunCreated      = "run.created"
	ChangeRunChanged      = "run.changed"
	ChangeScheduleChanged = "schedule.changed"
	ChangePlaybookChanged = "playbook.changed"
	ChangeWorkflowChanged = "workflow.changed"
	// ChangeProposalChanged: an operator proposal was made, decided,
	// amended, expired or finished (its id; read it through the
	// conversation's visibility).
	ChangeProposalChanged = "proposal.changed"
	// ChangeAuditAppended: a row was added to the audit trail (its id).
	ChangeAuditAppended = "audit.appended"
)

// AppChangesKey is the control key (InstanceStore.ControlSignal) every
// commit that records application changes notifies, in every process
// sharing the database.
const AppChangesKey = "app.changes"

// AppChange is one committed change of an application resource, numbered
// in commit order: Seq is the cursor of the change stream.
type AppChange struct {
	Seq        int64
	Type       string
	ResourceID string
	At         time.Time
}

// AppChangesKept is how many of the newest changes the store keeps: a
// cursor older than that has missed changes, and its client reloads.
const AppChangesKept = 10000

// AppChangeStore reads the application change log that the application's
// writes append to, in the same transactions.
type AppChangeStore interface {
	// ListAppChanges returns up to limit changes after the cursor, in order.
	ListAppChanges(ctx context.Context, after int64, limit int) ([]AppChange, error)
	// AppChangesRange is the oldest kept and the newest change's sequence
	// (0, 0: none yet).
	AppChangesRange(ctx context.Context) (oldest, newest int64, err error)
}
