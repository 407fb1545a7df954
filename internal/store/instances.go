package store

import (
	"context"
	"time"
)

// Instances, leases and ownership: several daemons on one database.
//
// Each daemon is an instance with a lease it renews. Work in progress —
// a queued or running turn, a turn awaiting confirmation whose proposal
// executes, an executing proposal, a running run — names its owner
// instance. When an instance's lease expires, some daemon's reaper marks
// it reaped and the reapers end its work: each piece is taken over by a
// compare-and-set on its owner, so it ends exactly once whichever daemons
// reap at the same time. A reaped instance never renews again. The
// reaping waits on no lock the reaped daemon may hold: a daemon whose
// sessions hang (they may hold its own rows for as long as they hang) is
// reaped when its lease expires all the same.

// Instance is a row of studio_instances: one daemon process.
type Instance struct {
	ID             string
	Address        string // where it serves, for people
	PID            int64
	Version        string
	StartedAt      time.Time
	HeartbeatAt    time.Time // its last renewal
	LeaseExpiresAt time.Time
	StoppedAt      *time.Time // it shut down cleanly
	ReapedAt       *time.Time // a reaper took its work over
}

// InstanceState is what an instance is at a moment.
type InstanceState string

// Instance states.
const (
	InstanceLive    InstanceState = "live"    // its lease runs
	InstanceExpired InstanceState = "expired" // its lease ran out; no reaper has taken its work yet
	InstanceStopped InstanceState = "stopped" // it shut down cleanly
	InstanceReaped  InstanceState = "reaped"  // its lease ran out and its work was taken over
)

// State is the instance's state at now.
func (i Instance) State(now time.Time) InstanceState {
	switch {
	case i.StoppedAt != nil:
		return InstanceStopped
	case i.ReapedAt != nil:
		return InstanceReaped
	case now.Before(i.LeaseExpiresAt):
		return InstanceLive
	}
	return InstanceExpired
}

// InstanceStore keeps the instances, their leases, the ownership of work
// and the control notifications that reach an owner in another process.
type InstanceStore interface {
	// RegisterInstance inserts an instance with a lease.
	RegisterInstance(ctx context.Context, p RegisterInstanceParams) (Instance, error)
	// RenewLease extends a lease. An instance that was reaped (or is
	// unknown) lost its lease: conflict, and it must stop working.
	RenewLease(ctx context.Context, p RenewLeaseParams) (Instance, error)
	// StopInstance ends a lease at once: a clean shutdown.
	StopInstance(ctx context.Context, p StopInstanceParams) error
	// ListInstances lists instances, newest first.
	ListInstances(ctx context.Context, p ListInstancesParams) ([]Instance, error)
	// ReapInstances marks reaped the instances whose lease expired before
	// Now (with All: every instance), except Except (the reaper, named as
	// the reaping's author), and returns them. It waits on no lock of the
	// reaped instance's sessions. A renewal that races the reaping may
	// commit too, but the reaping wins: the instance's fenced writes and
	// its next renewal are refused.
	ReapInstances(ctx context.Context, p ReapInstancesParams) ([]Instance, error)
	// PurgeInstances deletes instances stopped or reaped before Before
	// that own no work.
	PurgeInstances(ctx context.Context, p PurgeInstancesParams) (int64, error)
	// OrphanedWork lists the work of reaped instances (see the params).
	OrphanedWork(ctx context.Context, p OrphanedWorkParams) (OrphanedWork, error)
	// AdoptTurn moves an unfinished turn from From (reaped; "" for none)
	// to To, in one transaction with the proposals From left executing
	// (Proposals; those still From's), each at a new epoch: From can never
	// execute them after it, and whether it did is final (ExecutedAt) for
	// To to record. Conflict when the turn is no longer From's or ended.
	AdoptTurn(ctx context.Context, p AdoptTurnParams) (Turn, error)
	// DisownProposal moves an executing proposal from From (reaped) to To
	// ("" for none) at a new epoch, with its Audit row when set, once;
	// conflict when it is no longer From's or no longer executing.
	DisownProposal(ctx context.Context, p DisownProposalParams) (Proposal, error)
	// ClaimTurn moves the oldest queued turn that Instance does not own
	// to running, owned by Instance; rows another claimer holds are passed
	// over (SKIP LOCKED). ok is false when there is none.
	ClaimTurn(ctx context.Context, p ClaimTurnParams) (t Turn, ok bool, err error)
	// ReleaseTurn gives a queued turn of From back to any claimer (owner
	// none) and announces TurnsQueued; conflict when it is not From's and
	// queued.
	ReleaseTurn(ctx context.Context, p ReleaseTurnParams) (Turn, error)
	// ReapRun fails a running run of From (reaped; "" for none) with the
	// given reason; conflict when it is not From's or not running.
	ReapRun(ctx context.Context, p ReapRunParams) (Run, error)
	// ActiveWork lists the unfinished turns and runs with their owners,
	// for doctor.
	ActiveWork(ctx context.Context, p ActiveWorkParams) (ActiveWork, error)

	// ControlSignal returns a channel that is closed after the next
	// commit, by this process or another sharing the database, that asks
	// for attention to key (ControlKey). Take it before reading the row it
	// is about, then wait on it: no notification is missed.
	ControlSignal(key string) <-chan struct{}
	// Announce wakes ControlSignal(key) in every process sharing the
	// database, without a write (a best-effort hint: waiters must also
	// look again now and then).
	Announce(ctx context.Context, key string) error
}

// Control keys. A commit that records a cancel of a turn or run, or
// claims a turn, notifies its key; new queued work notifies the queue's.
const (
	// TurnsQueued: a turn waits for a worker and another daemon may take it.
	TurnsQueued = "turns-queued"
	// RunsQueued: a run was queued.
	RunsQueued = "runs-queued"
)

// TurnKey is the control key of one turn.
func TurnKey(requestID string) string { return "turn:" + requestID }

// RunKey is the control key of one run.
func RunKey(id string) string { return "run:" + id }

// RegisterInstanceParams registers an instance; its lease runs until
// Instance.LeaseExpiresAt.
type RegisterInstanceParams struct {
	Instance Instance
}

// RenewLeaseParams renews a lease until ExpiresAt.
type RenewLeaseParams struct {
	ID        string
	Now       time.Time
	ExpiresAt time.Time
}

// StopInstanceParams ends a lease.
type StopInstanceParams struct {
	ID  string
	Now time.Time
}

// ListInstancesParams bounds the list.
type ListInstancesParams struct {
	Limit int
}

// ReapInstancesParams selects the instances to reap.
type ReapInstancesParams struct {
	Now    time.Time
	Except string // this process's instance
	// All reaps every other instance whatever its lease: a daemon that
	// holds the database alone (SQLite and its data directory's lock)
	// knows every other instance is gone.
	All bool
}

// PurgeInstancesParams bounds PurgeInstances.
type PurgeInstancesParams struct {
	Before time.Time
}

// OrphanedWorkParams bounds each list of OrphanedWork. Orphaned is what
// a reaped instance owns, and what runs or executes with no owner at all.
type OrphanedWorkParams struct {
	Limit int
}

// OrphanedWork is what reapers end or hand over.
type OrphanedWork struct {
	// Turns: queued, running, or awaiting confirmation with an executing
	// proposal; Owner names the reaped owner ("" for none).
	Turns []Turn
	// Proposals left executing by a reaped instance whose turns are not
	// in Turns (their turn ended, or runs elsewhere).
	Proposals []Proposal
	// Runs left running.
	Runs []Run
}

// AdoptTurnParams takes over a turn.
type AdoptTurnParams struct {
	RequestID string
	From      string // the reaped owner ("" when it had none)
	To        string
	// Proposals are the proposals From left executing: those still From's
	// move to To with the turn.
	Proposals []string
}

// DisownProposalParams takes an executing proposal from a reaped owner.
type DisownProposalParams struct {
	ID    string
	From  string
	To    string                  // the new owner; "" for none (indeterminate)
	Audit *AppendAdminEventParams // its audit row, if any (indeterminate)
}

// ClaimTurnParams claims a queued turn.
type ClaimTurnParams struct {
	Instance string
	Now      time.Time
}

// ReleaseTurnParams hands a queued turn back.
type ReleaseTurnParams struct {
	RequestID string
	From      string
}

// ReapRunParams fails a run whose owner died.
type ReapRunParams struct {
	ID           string
	From         string
	ErrorCode    string
	ErrorMessage string
	Now          time.Time
}

// ActiveWorkParams bounds ActiveWork's lists.
type ActiveWorkParams struct {
	Limit int
}

// ActiveWork is the unfinished work with its owners.
type ActiveWork struct {
	Turns []Turn // queued, running, awaiting confirmation
	Runs  []Run  // queued, running
}
