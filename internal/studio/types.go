package studio

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The wire projections of the application's resources: camelCase JSON,
// times as Unix seconds (the protocol's style), no host paths, no secrets.

// Playbook is a named prompt with declared arguments.
type Playbook struct {
	ID          string        `json:"id"`
	Project     string        `json:"project"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Prompt      string        `json:"prompt"`
	Args        []PlaybookArg `json:"args"`
	Version     int64         `json:"version"`
	CreatedAt   float64       `json:"createdAt"`
	UpdatedAt   float64       `json:"updatedAt"`
}

// PlaybookArg declares one argument of a playbook. It is both part of the
// projection and the input of create_playbook and update_playbook.
type PlaybookArg struct {
	Name        string  `json:"name" jsonschema:"minLength=1,maxLength=40,pattern=^[a-z][a-z0-9_]*$" jsonschema_description:"Argument name: lowercase letters, digits and underscores, starting with a letter (for example repo). The prompt refers to it as {{repo}}."`
	Description string  `json:"description,omitempty" jsonschema:"maxLength=500" jsonschema_description:"What the argument means, shown to whoever launches the playbook."`
	Required    bool    `json:"required,omitzero" jsonschema_description:"Whether a launch must give this argument (a default also satisfies it)."`
	Default     *string `json:"default,omitzero" jsonschema:"maxLength=4096" jsonschema_description:"Value used when a launch does not give the argument."`
}

// Workflow is an ordered list of playbook steps.
type Workflow struct {
	ID          string         `json:"id"`
	Project     string         `json:"project"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Steps       []WorkflowStep `json:"steps"`
	Version     int64          `json:"version"`
	CreatedAt   float64        `json:"createdAt"`
	UpdatedAt   float64        `json:"updatedAt"`
}

// WorkflowStep runs one playbook with an input and arguments.
type WorkflowStep struct {
	PlaybookID   string            `json:"playbookId"`
	PlaybookName string            `json:"playbookName"`
	Input        string            `json:"input"`
	Args         map[string]string `json:"args"`
}

// Run is one execution of a playbook.
type Run struct {
	ID                string            `json:"id"`
	Project           string            `json:"project"`
	PlaybookID        string            `json:"playbookId"`
	PlaybookName      string            `json:"playbookName"`
	PlaybookVersion   int64             `json:"playbookVersion"`
	Input             string            `json:"input"`
	Args              map[string]string `json:"args"`
	Status            string            `json:"status"`
	Trigger           string            `json:"trigger"`
	ScheduleID        *string           `json:"scheduleId"`
	RetryOf           *string           `json:"retryOf"`
	Output            string            `json:"output"`
	OutputTruncated   bool              `json:"outputTruncated"`
	Error             *RunError         `json:"error"`
	Version           int64             `json:"version"`
	CreatedAt         float64           `json:"createdAt"`
	UpdatedAt         float64           `json:"updatedAt"`
	StartedAt         *float64          `json:"startedAt"`
	EndedAt           *float64          `json:"endedAt"`
	CancelRequestedAt *float64          `json:"cancelRequestedAt"`
	DurationMs        *int64            `json:"durationMs"`
	// WorkflowID and WorkflowStep (0-based) name the workflow launch the
	// run is a step of; absent for a run launched on its own.
	WorkflowID   *string `json:"workflowId,omitzero"`
	WorkflowStep *int    `json:"workflowStep,omitzero"`
}

// RunError is why a run failed or was cancelled.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Schedule launches a playbook on a cron expression.
type Schedule struct {
	ID            string            `json:"id"`
	Project       string            `json:"project"`
	Name          string            `json:"name"`
	Cron          string            `json:"cron"`
	PlaybookID    string            `json:"playbookId"`
	PlaybookName  string            `json:"playbookName"`
	Input         string            `json:"input"`
	Args          map[string]string `json:"args"`
	Enabled       bool              `json:"enabled"`
	NextRunAt     *float64          `json:"nextRunAt"`
	LastRunAt     *float64          `json:"lastRunAt"`
	LastRunID     *string           `json:"lastRunId"`
	SkippedRuns   int64             `json:"skippedRuns"`
	LastSkippedAt *float64          `json:"lastSkippedAt"`
	Version       int64             `json:"version"`
	CreatedAt     float64           `json:"createdAt"`
	UpdatedAt     float64           `json:"updatedAt"`
}

// AuditEvent is one row of the append-only audit trail.
type AuditEvent struct {
	ID        int64          `json:"id"`
	CreatedAt float64        `json:"createdAt"`
	Actor     string         `json:"actor"`
	Action    string         `json:"action"`
	TargetID  *string        `json:"targetId"`
	Details   jsontext.Value `json:"details"`
}

// Pages of list queries. NextCursor is opaque; absent on the last page.
type (
	PlaybookPage struct {
		Playbooks  []Playbook `json:"playbooks"`
		NextCursor string     `json:"nextCursor,omitempty"`
	}
	WorkflowPage struct {
		Workflows  []Workflow `json:"workflows"`
		NextCursor string     `json:"nextCursor,omitempty"`
	}
	RunPage struct {
		Runs       []Run  `json:"runs"`
		NextCursor string `json:"nextCursor,omitempty"`
		// Counts (first page only) counts by status the runs the filters
		// other than status match, Total their sum: the fleet's chips.
		Counts map[string]int64 `json:"counts,omitzero"`
		Total  *int64           `json:"total,omitzero"`
	}
	SchedulePage struct {
		Schedules  []Schedule `json:"schedules"`
		NextCursor string     `json:"nextCursor,omitempty"`
	}
	AuditPage struct {
		Events     []AuditEvent `json:"events"`
		NextCursor string       `json:"nextCursor,omitempty"`
	}
)

// RunStats counts the runs created in a window by status.
type RunStats struct {
	Window           string           `json:"window"`
	Since            float64          `json:"since"`
	Until            float64          `json:"until"`
	Total            int64            `json:"total"`
	Counts           map[string]int64 `json:"counts"`
	MedianDurationMs *int64           `json:"medianDurationMs"`
}

// CronPreview is the next run times of a cron expression.
type CronPreview struct {
	Cron string    `json:"cron"`
	Next []float64 `json:"next"`
}

func stamp(t time.Time) float64 { return protocol.Timestamp(t) }

func stampPtr(t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	f := protocol.Timestamp(*t)
	return &f
}

func argsView(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// PlaybookView projects a stored playbook.
func PlaybookView(p store.Playbook) Playbook {
	v := Playbook{ID: p.ID, Project: p.Project, Name: p.Name, Description: p.Description, Prompt: p.Prompt,
		Args: make([]PlaybookArg, 0, len(p.Args)), Version: p.Version, CreatedAt: stamp(p.CreatedAt), UpdatedAt: stamp(p.UpdatedAt)}
	for _, a := range p.Args {
		v.Args = append(v.Args, PlaybookArg{Name: a.Name, Description: a.Description, Required: a.Required, Default: a.Default})
	}
	return v
}

// WorkflowView projects a stored workflow.
func WorkflowView(w store.Workflow) Workflow {
	v := Workflow{ID: w.ID, Project: w.Project, Name: w.Name, Description: w.Description,
		Steps: make([]WorkflowStep, 0, len(w.Steps)), Version: w.Version, CreatedAt: stamp(w.CreatedAt), UpdatedAt: stamp(w.UpdatedAt)}
	for _, st := range w.Steps {
		v.Steps = append(v.Steps, WorkflowStep{PlaybookID: st.PlaybookID, PlaybookName: st.PlaybookName, Input: st.Input, Args: argsView(st.Args)})
	}
	return v
}

// RunView projects a stored run.
func RunView(r store.Run) Run {
	v := Run{ID: r.ID, Project: r.Project, PlaybookID: r.PlaybookID, PlaybookName: r.PlaybookName,
		PlaybookVersion: r.PlaybookVersion, Input: r.Input, Args: argsView(r.Args), Status: string(r.Status),
		Trigger: string(r.Trigger), ScheduleID: r.ScheduleID, RetryOf: r.RetryOf, Output: r.Output,
		OutputTruncated: r.OutputTruncated, Version: r.Version, CreatedAt: stamp(r.CreatedAt), UpdatedAt: stamp(r.UpdatedAt),
		StartedAt: stampPtr(r.StartedAt), EndedAt: stampPtr(r.EndedAt), CancelRequestedAt: stampPtr(r.CancelRequestedAt),
		WorkflowID: r.WorkflowID, WorkflowStep: r.WorkflowStep}
	if r.ErrorCode != nil || r.ErrorMessage != nil {
		e := &RunError{}
		if r.ErrorCode != nil {
			e.Code = *r.ErrorCode
		}
		if r.ErrorMessage != nil {
			e.Message = *r.ErrorMessage
		}
		v.Error = e
	}
	if r.StartedAt != nil && r.EndedAt != nil {
		ms := r.EndedAt.Sub(*r.StartedAt).Milliseconds()
		v.DurationMs = &ms
	}
	return v
}

// ScheduleView projects a stored schedule.
func ScheduleView(sc store.Schedule) Schedule {
	return Schedule{ID: sc.ID, Project: sc.Project, Name: sc.Name, Cron: sc.Cron, PlaybookID: sc.PlaybookID,
		PlaybookName: sc.PlaybookName, Input: sc.Input, Args: argsView(sc.Args), Enabled: sc.Enabled,
		NextRunAt: stampPtr(sc.NextRunAt), LastRunAt: stampPtr(sc.LastRunAt), LastRunID: sc.LastRunID,
		SkippedRuns: sc.SkippedRuns, LastSkippedAt: stampPtr(sc.LastSkippedAt), Version: sc.Version,
		CreatedAt: stamp(sc.CreatedAt), UpdatedAt: stamp(sc.UpdatedAt)}
}

// AuditView projects an admin_events row.
func AuditView(e store.AdminEvent) AuditEvent {
	d := e.Details
	if len(d) == 0 {
		d = jsontext.Value(`{}`)
	}
	return AuditEvent{ID: e.ID, CreatedAt: stamp(e.CreatedAt), Actor: e.Actor, Action: e.Action, TargetID: e.TargetID, Details: d}
}
