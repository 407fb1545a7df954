package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// Doctor fetches the daemon's health report (GET /api/app/system/health).
func (c *Client) Doctor(ctx context.Context) (studio.DoctorReport, error) {
	var r studio.DoctorReport
	err := c.Do(ctx, http.MethodGet, "/api/app/system/health", nil, &r)
	return r, err
}

// Execute runs an application command by its type (POST
// /api/app/commands/{type}) and returns what it did.
func (c *Client) Execute(ctx context.Context, cmd studio.Command) (studio.Result, error) {
	var r studio.Result
	err := c.Do(ctx, http.MethodPost, "/api/app/commands/"+url.PathEscape(studio.TypeOf(cmd)), cmd, &r)
	return r, err
}

// Maintenance runs one maintenance action (POST /api/app/system/maintenance).
func (c *Client) Maintenance(ctx context.Context, cmd studio.RunMaintenanceCommand) (studio.MaintenanceResult, error) {
	var r studio.MaintenanceResult
	err := c.Do(ctx, http.MethodPost, "/api/app/system/maintenance", cmd, &r)
	return r, err
}

// ListRuns pages runs newest first; q holds the query parameters (status,
// playbook, since, ...), limit and cursor included.
func (c *Client) ListRuns(ctx context.Context, q url.Values) (studio.RunPage, error) {
	var r studio.RunPage
	err := c.Do(ctx, http.MethodGet, "/api/app/runs?"+q.Encode(), nil, &r)
	return r, err
}

// GetRun fetches one run.
func (c *Client) GetRun(ctx context.Context, id string) (studio.Run, error) {
	var r studio.Run
	err := c.Do(ctx, http.MethodGet, "/api/app/runs/"+url.PathEscape(id), nil, &r)
	return r, err
}

// CancelRun cancels a queued or running run.
func (c *Client) CancelRun(ctx context.Context, id string) (studio.Run, error) {
	var r studio.Run
	err := c.Do(ctx, http.MethodPost, "/api/app/runs/"+url.PathEscape(id)+"/cancel", struct{}{}, &r)
	return r, err
}

// RetryRun launches a failed or cancelled run again; the answer is the new run.
func (c *Client) RetryRun(ctx context.Context, id string) (studio.Run, error) {
	var r studio.Run
	err := c.Do(ctx, http.MethodPost, "/api/app/runs/"+url.PathEscape(id)+"/retry", struct{}{}, &r)
	return r, err
}

// ListPlaybooks pages playbooks by name.
func (c *Client) ListPlaybooks(ctx context.Context, q url.Values) (studio.PlaybookPage, error) {
	var r studio.PlaybookPage
	err := c.Do(ctx, http.MethodGet, "/api/app/playbooks?"+q.Encode(), nil, &r)
	return r, err
}

// GetPlaybook fetches a playbook by id or name.
func (c *Client) GetPlaybook(ctx context.Context, ref string) (studio.Playbook, error) {
	var r studio.Playbook
	err := c.Do(ctx, http.MethodGet, "/api/app/playbooks/"+url.PathEscape(ref), nil, &r)
	return r, err
}

// LaunchPlaybook queues a run of a playbook.
func (c *Client) LaunchPlaybook(ctx context.Context, cmd studio.LaunchPlaybookCommand) (studio.Run, error) {
	var r studio.Run
	ref := cmd.Playbook
	cmd.Playbook = ""
	err := c.Do(ctx, http.MethodPost, "/api/app/playbooks/"+url.PathEscape(ref)+"/launch", cmd, &r)
	return r, err
}

// ListSchedules pages schedules by name.
func (c *Client) ListSchedules(ctx context.Context, q url.Values) (studio.SchedulePage, error) {
	var r studio.SchedulePage
	err := c.Do(ctx, http.MethodGet, "/api/app/schedules?"+q.Encode(), nil, &r)
	return r, err
}

// SetScheduleEnabled resumes (true) or pauses (false) a schedule.
func (c *Client) SetScheduleEnabled(ctx context.Context, ref string, enabled bool) (studio.Schedule, error) {
	action := "disable"
	if enabled {
		action = "enable"
	}
	var r studio.Schedule
	err := c.Do(ctx, http.MethodPost, "/api/app/schedules/"+url.PathEscape(ref)+"/"+action, struct{}{}, &r)
	return r, err
}

// deleteQuery is the query of a delete: the version last read, if any.
func deleteQuery(expectedVersion int64) string {
	if expectedVersion == 0 {
		return ""
	}
	return "?expectedVersion=" + strconv.FormatInt(expectedVersion, 10)
}

// CreatePlaybook creates a playbook.
func (c *Client) CreatePlaybook(ctx context.Context, cmd studio.CreatePlaybookCommand) (studio.Playbook, error) {
	var r studio.Playbook
	err := c.Do(ctx, http.MethodPost, "/api/app/playbooks", cmd, &r)
	return r, err
}

// UpdatePlaybook changes a playbook (cmd.Playbook names it; cmd.ExpectedVersion is required).
func (c *Client) UpdatePlaybook(ctx context.Context, cmd studio.UpdatePlaybookCommand) (studio.Playbook, error) {
	var r studio.Playbook
	err := c.Do(ctx, http.MethodPatch, "/api/app/playbooks/"+url.PathEscape(cmd.Playbook), cmd, &r)
	return r, err
}

// DeletePlaybook deletes a playbook; expectedVersion 0 deletes whatever version it has.
func (c *Client) DeletePlaybook(ctx context.Context, ref string, expectedVersion int64) (studio.Result, error) {
	var r studio.Result
	err := c.Do(ctx, http.MethodDelete, "/api/app/playbooks/"+url.PathEscape(ref)+deleteQuery(expectedVersion), nil, &r)
	return r, err
}

// ListWorkflows pages workflows by name.
func (c *Client) ListWorkflows(ctx context.Context, q url.Values) (studio.WorkflowPage, error) {
	var r studio.WorkflowPage
	err := c.Do(ctx, http.MethodGet, "/api/app/workflows?"+q.Encode(), nil, &r)
	return r, err
}

// GetWorkflow fetches a workflow by id or name.
func (c *Client) GetWorkflow(ctx context.Context, ref string) (studio.Workflow, error) {
	var r studio.Workflow
	err := c.Do(ctx, http.MethodGet, "/api/app/workflows/"+url.PathEscape(ref), nil, &r)
	return r, err
}

// CreateWorkflow creates a workflow.
func (c *Client) CreateWorkflow(ctx context.Context, cmd studio.CreateWorkflowCommand) (studio.Workflow, error) {
	var r studio.Workflow
	err := c.Do(ctx, http.MethodPost, "/api/app/workflows", cmd, &r)
	return r, err
}

// DeleteWorkflow deletes a workflow (its runs stay).
func (c *Client) DeleteWorkflow(ctx context.Context, ref string, expectedVersion int64) (studio.Result, error) {
	var r studio.Result
	err := c.Do(ctx, http.MethodDelete, "/api/app/workflows/"+url.PathEscape(ref)+deleteQuery(expectedVersion), nil, &r)
	return r, err
}

// LaunchWorkflow queues one run per step.
func (c *Client) LaunchWorkflow(ctx context.Context, ref string, expectedVersion int64) (studio.WorkflowLaunch, error) {
	var r studio.WorkflowLaunch
	err := c.Do(ctx, http.MethodPost, "/api/app/workflows/"+url.PathEscape(ref)+"/launch", studio.LaunchWorkflowCommand{ExpectedVersion: expectedVersion}, &r)
	return r, err
}

// GetSchedule fetches a schedule by id or name.
func (c *Client) GetSchedule(ctx context.Context, ref string) (studio.Schedule, error) {
	var r studio.Schedule
	err := c.Do(ctx, http.MethodGet, "/api/app/schedules/"+url.PathEscape(ref), nil, &r)
	return r, err
}

// CreateSchedule creates a schedule.
func (c *Client) CreateSchedule(ctx context.Context, cmd studio.CreateScheduleCommand) (studio.Schedule, error) {
	var r studio.Schedule
	err := c.Do(ctx, http.MethodPost, "/api/app/schedules", cmd, &r)
	return r, err
}

// UpdateSchedule changes a schedule (cmd.Schedule names it; cmd.ExpectedVersion is required).
func (c *Client) UpdateSchedule(ctx context.Context, cmd studio.UpdateScheduleCommand) (studio.Schedule, error) {
	var r studio.Schedule
	err := c.Do(ctx, http.MethodPatch, "/api/app/schedules/"+url.PathEscape(cmd.Schedule), cmd, &r)
	return r, err
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, ref string, expectedVersion int64) (studio.Result, error) {
	var r studio.Result
	err := c.Do(ctx, http.MethodDelete, "/api/app/schedules/"+url.PathEscape(ref)+deleteQuery(expectedVersion), nil, &r)
	return r, err
}

// ListAudit pages the audit trail newest first; q holds the server's
// filters (action, actor, commandType, target, targetId, since, until).
func (c *Client) ListAudit(ctx context.Context, q url.Values) (studio.AuditPage, error) {
	var r studio.AuditPage
	err := c.Do(ctx, http.MethodGet, "/api/app/audit?"+q.Encode(), nil, &r)
	return r, err
}

// AppEvents follows GET /api/app/events from a cursor (after < 0: from the
// newest change on) and calls fn per change until fn returns an error
// (ErrStopStream ends it quietly), the context ends or the stream does.
func (c *Client) AppEvents(ctx context.Context, after int64, fn func(studio.ChangeEvent) error) error {
	path := "/api/app/events"
	if after >= 0 {
		path += "?after=" + strconv.FormatInt(after, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	body, err := c.openStream(req)
	if err != nil {
		return err
	}
	defer body.Close()
	// The server ends the stream with an ": error CODE" comment when it
	// must (access_revoked): that is the typed error returned.
	var ended protocol.ErrorCode
	onComment := func(text string) {
		if code, ok := strings.CutPrefix(text, "error "); ok {
			ended = protocol.ErrorCode(strings.TrimSpace(code))
		}
	}
	err = readEvents(body, onComment, func(ev Event) error {
		var ch studio.ChangeEvent
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
			return err
		}
		return fn(ch)
	})
	if errors.Is(err, ErrStopStream) || ctx.Err() != nil {
		return nil
	}
	if err == nil && ended != "" {
		return protocol.Errorf(ended, "the server ended the stream: %s", ended)
	}
	return err
}
