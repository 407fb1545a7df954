package store

import (
	"context"
	"time"
)

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
