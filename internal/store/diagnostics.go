package store

import "time"

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
	// indeterminate until an administrator reconciles them (docs/design.md §9.4).
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
	// ExecutedAt is its execution marker: set, the command ran (a daemon
	// sharing the database records it as executed at its reaper's next
	// look); unset, it did not, or ran before the marker existed.
	ExecutedAt *time.Time
}
