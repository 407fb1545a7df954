package tools

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// App is what the read tools need of the application services.
type App interface {
	ListRuns(ctx context.Context, q studio.RunQuery) (studio.RunPage, error)
	GetRun(ctx context.Context, id string) (studio.Run, error)
	RunStats(ctx context.Context, window string) (studio.RunStats, error)
	ListPlaybooks(ctx context.Context, q studio.PlaybookQuery) (studio.PlaybookPage, error)
	GetPlaybook(ctx context.Context, ref string) (studio.Playbook, error)
	ListWorkflows(ctx context.Context, q studio.WorkflowQuery) (studio.WorkflowPage, error)
	GetWorkflow(ctx context.Context, ref string) (studio.Workflow, error)
	ListSchedules(ctx context.Context, q studio.ScheduleQuery) (studio.SchedulePage, error)
	GetSchedule(ctx context.Context, ref string) (studio.Schedule, error)
	ListAudit(ctx context.Context, q studio.AuditQuery) (studio.AuditPage, error)
}

// Inputs are checked with the application's own validators (studio.CheckRef,
// studio.CheckText): a reference that is not an id or a name, such as a URL or
// a path, is refused before any query runs.

func checkLimit(n int) error {
	if n < 0 || n > 50 {
		return protocol.Errorf(protocol.Validation, "limit must be from 1 to 50").With("field", "limit")
	}
	return nil
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// ListRunsInput filters runs.
type ListRunsInput struct {
	Status   string `json:"status,omitempty" jsonschema:"enum=queued,enum=running,enum=succeeded,enum=failed,enum=cancelled" jsonschema_description:"Only runs with this status."`
	Playbook string `json:"playbook,omitempty" jsonschema:"maxLength=64" jsonschema_description:"Only runs of this playbook (name or id)."`
	Trigger  string `json:"trigger,omitempty" jsonschema:"enum=manual,enum=schedule,enum=operator" jsonschema_description:"Only runs started this way."`
	Since    string `json:"since,omitempty" jsonschema:"enum=1h,enum=24h,enum=7d,enum=30d" jsonschema_description:"Only runs created within this window."`
	Limit    int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50" jsonschema_description:"How many runs (default 20)."`
}

// Validate implements validator.
func (in ListRunsInput) Validate() error {
	if err := studio.CheckRef("playbook", in.Playbook, false); err != nil {
		return err
	}
	return checkLimit(in.Limit)
}

var windows = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// RunSummary is a run as list tools show it: no output, bounded error.
type RunSummary struct {
	ID         string   `json:"id"`
	Playbook   string   `json:"playbook"`
	Status     string   `json:"status"`
	Trigger    string   `json:"trigger"`
	Input      string   `json:"input,omitempty"`
	CreatedAt  float64  `json:"createdAt"`
	DurationMs *int64   `json:"durationMs,omitempty"`
	Error      string   `json:"error,omitempty"`
	EndedAt    *float64 `json:"endedAt,omitempty"`
}

// RunList is list_runs' answer.
type RunList struct {
	Runs    []RunSummary `json:"runs"`
	HasMore bool         `json:"hasMore"`
}

func summarizeRun(r studio.Run) RunSummary {
	s := RunSummary{ID: r.ID, Playbook: r.PlaybookName, Status: r.Status, Trigger: r.Trigger, Input: clip(r.Input, 200),
		CreatedAt: r.CreatedAt, DurationMs: r.DurationMs, EndedAt: r.EndedAt}
	if r.Error != nil {
		s.Error = clip(r.Error.Code+": "+r.Error.Message, 300)
	}
	return s
}

// IDInput names one resource by id.
type IDInput struct {
	ID string `json:"id" jsonschema:"maxLength=64" jsonschema_description:"The id."`
}

// Validate implements validator.
func (in IDInput) Validate() error { return studio.CheckRef("id", in.ID, true) }

// RunDetail is get_run's answer: the run with its output, bounded.
type RunDetail struct {
	studio.Run
}

// StatsInput picks the stats window.
type StatsInput struct {
	Window string `json:"window" jsonschema:"enum=24h,enum=7d" jsonschema_description:"The window: the last 24 hours or the last 7 days."`
}

// SearchInput filters a list by text.
type SearchInput struct {
	Query string `json:"query,omitempty" jsonschema:"maxLength=200" jsonschema_description:"Text to look for in names and descriptions."`
	Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50" jsonschema_description:"How many (default 20)."`
}

// Validate implements validator.
func (in SearchInput) Validate() error {
	if err := studio.CheckText("query", in.Query, 200, false); err != nil {
		return err
	}
	return checkLimit(in.Limit)
}

// PlaybookRef names a playbook.
type PlaybookRef struct {
	Playbook string `json:"playbook" jsonschema:"maxLength=64" jsonschema_description:"Playbook name or id."`
}

// Validate implements validator.
func (in PlaybookRef) Validate() error { return studio.CheckRef("playbook", in.Playbook, true) }

// WorkflowRef names a workflow.
type WorkflowRef struct {
	Workflow string `json:"workflow" jsonschema:"maxLength=64" jsonschema_description:"Workflow name or id."`
}

// Validate implements validator.
func (in WorkflowRef) Validate() error { return studio.CheckRef("workflow", in.Workflow, true) }

// ScheduleRef names a schedule.
type ScheduleRef struct {
	Schedule string `json:"schedule" jsonschema:"maxLength=64" jsonschema_description:"Schedule name or id."`
}

// Validate implements validator.
func (in ScheduleRef) Validate() error { return studio.CheckRef("schedule", in.Schedule, true) }

// ListSchedulesInput filters schedules.
type ListSchedulesInput struct {
	Enabled *bool  `json:"enabled,omitempty" jsonschema_description:"Only enabled (true) or disabled (false) schedules."`
	Query   string `json:"query,omitempty" jsonschema:"maxLength=200" jsonschema_description:"Text to look for in names."`
	Limit   int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50" jsonschema_description:"How many (default 20)."`
}

// Validate implements validator.
func (in ListSchedulesInput) Validate() error {
	if err := studio.CheckText("query", in.Query, 200, false); err != nil {
		return err
	}
	return checkLimit(in.Limit)
}

// AuditInput filters the audit trail.
type AuditInput struct {
	Action string `json:"action,omitempty" jsonschema:"maxLength=64" jsonschema_description:"Only events with this action, e.g. studio.operator.command."`
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50" jsonschema_description:"How many of the newest events (default 20)."`
}

// Validate implements validator.
func (in AuditInput) Validate() error {
	if err := studio.CheckRef("action", in.Action, false); err != nil {
		return err
	}
	return checkLimit(in.Limit)
}

func limitOr(n int) int {
	if n == 0 {
		return 20
	}
	return n
}

// ReadTools are the tools that answer questions from the application.
func ReadTools(a App, now func() time.Time) []Spec {
	return []Spec{
		Read("list_runs", "List runs", "Runs newest first, filtered by status, playbook, trigger and age. Output is not included; use get_run.",
			"runs.list", func(ctx context.Context, _ Env, in ListRunsInput) (RunList, error) {
				q := studio.RunQuery{Status: in.Status, Playbook: in.Playbook, Trigger: in.Trigger, Limit: limitOr(in.Limit)}
				if in.Since != "" {
					since := now().Add(-windows[in.Since])
					q.Since = &since
				}
				page, err := a.ListRuns(ctx, q)
				if err != nil {
					return RunList{}, err
				}
				out := RunList{Runs: []RunSummary{}, HasMore: page.NextCursor != ""}
				for _, r := range page.Runs {
					out.Runs = append(out.Runs, summarizeRun(r))
				}
				return out, nil
			}),
		Read("get_run", "Get a run", "One run by id, with its input, arguments, status, error and (bounded) output.",
			"runs.get", func(ctx context.Context, _ Env, in IDInput) (RunDetail, error) {
				r, err := a.GetRun(ctx, in.ID)
				if err != nil {
					return RunDetail{}, err
				}
				if len(r.Output) > 8<<10 {
					r.Output, r.OutputTruncated = clip(r.Output, 8<<10), true
				}
				return RunDetail{r}, nil
			}),
		Read("run_stats", "Run statistics", "Counts of runs by status and the median duration over the last 24 hours or 7 days.",
			"runs.stats", func(ctx context.Context, _ Env, in StatsInput) (studio.RunStats, error) {
				return a.RunStats(ctx, in.Window)
			}),
		Read("list_playbooks", "List playbooks", "Playbooks by name, optionally matching a text.",
			"playbooks.list", func(ctx context.Context, _ Env, in SearchInput) (studio.PlaybookPage, error) {
				return a.ListPlaybooks(ctx, studio.PlaybookQuery{Query: in.Query, Limit: limitOr(in.Limit)})
			}),
		Read("get_playbook", "Get a playbook", "One playbook by name or id: description, prompt, declared arguments, version.",
			"playbooks.get", func(ctx context.Context, _ Env, in PlaybookRef) (studio.Playbook, error) {
				return a.GetPlaybook(ctx, in.Playbook)
			}),
		Read("list_workflows", "List workflows", "Workflows by name, optionally matching a text.",
			"workflows.list", func(ctx context.Context, _ Env, in SearchInput) (studio.WorkflowPage, error) {
				return a.ListWorkflows(ctx, studio.WorkflowQuery{Query: in.Query, Limit: limitOr(in.Limit)})
			}),
		Read("get_workflow", "Get a workflow", "One workflow by name or id, with its ordered steps.",
			"workflows.get", func(ctx context.Context, _ Env, in WorkflowRef) (studio.Workflow, error) {
				return a.GetWorkflow(ctx, in.Workflow)
			}),
		Read("list_schedules", "List schedules", "Schedules by name, optionally only enabled or disabled ones.",
			"schedules.list", func(ctx context.Context, _ Env, in ListSchedulesInput) (studio.SchedulePage, error) {
				return a.ListSchedules(ctx, studio.ScheduleQuery{Enabled: in.Enabled, Query: in.Query, Limit: limitOr(in.Limit)})
			}),
		Read("get_schedule", "Get a schedule", "One schedule by name or id: cron, playbook, enabled, next and last run.",
			"schedules.get", func(ctx context.Context, _ Env, in ScheduleRef) (studio.Schedule, error) {
				return a.GetSchedule(ctx, in.Schedule)
			}),
		Read("list_audit_events", "Recent audit events", "The newest entries of the append-only audit trail.",
			"audit.list", func(ctx context.Context, _ Env, in AuditInput) (studio.AuditPage, error) {
				return a.ListAudit(ctx, studio.AuditQuery{Action: in.Action, Limit: limitOr(in.Limit)})
			}),
	}
}
