package store

import "time"

// SaveRunOutputParams records a running run's output so far.
type SaveRunOutputParams struct {
	ID        string
	Output    string
	Truncated bool
	Now       time.Time
}

// RunActivityParams asks for runs over time: Edges are the bucket bounds
// (n+1 for n buckets, increasing; the caller's hours or days in its own
// time zone), DurationBounds the upper bounds of the duration bins (the
// last bin is open above).
type RunActivityParams struct {
	Edges          []time.Time
	DurationBounds []time.Duration
}

// RunActivity is RunActivity's answer.
type RunActivity struct {
	// Buckets[i] counts by status the runs created in [Edges[i], Edges[i+1]).
	Buckets []map[RunStatus]int64
	Total   int64
	// Durations[j] counts the runs created in the range that ran, by
	// duration bin; Finished is their sum.
	Durations []int64
	Finished  int64
	Median    *time.Duration
	P90       *time.Duration
}

// DeleteWorkflowParams deletes a workflow at its expected version.
type DeleteWorkflowParams struct {
	ID              string
	ExpectedVersion int64
	Audit           *AppendAdminEventParams
}

// LaunchWorkflowParams queues a workflow's steps. RunIDs holds one new id
// per step; Args[i], when set, are step i's bound arguments (nil: the
// step's own).
type LaunchWorkflowParams struct {
	WorkflowID      string
	ExpectedVersion int64
	RunIDs          []string
	Args            []map[string]string
	Trigger         RunTrigger
	Now             time.Time
	Audit           *AppendAdminEventParams
}
