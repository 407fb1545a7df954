package httpapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/studio/operator/internal/app"
)

// Doctor fetches the daemon's health report (GET /api/app/system/health).
func (c *Client) Doctor(ctx context.Context) (app.DoctorReport, error) {
	var r app.DoctorReport
	err := c.Do(ctx, http.MethodGet, "/api/app/system/health", nil, &r)
	return r, err
}

// Execute runs an application command by its type (POST
// /api/app/commands/{type}) and returns what it did.
func (c *Client) Execute(ctx context.Context, cmd app.Command) (app.Result, error) {
	var r app.Result
	err := c.Do(ctx, http.MethodPost, "/api/app/commands/"+url.PathEscape(app.TypeOf(cmd)), cmd, &r)
	return r, err
}

// Maintenance runs one maintenance action (POST /api/app/system/maintenance).
func (c *Client) Maintenance(ctx context.Context, cmd app.RunMaintenanceCommand) (app.MaintenanceResult, error) {
	var r app.MaintenanceResult
	err := c.Do(ctx, http.MethodPost, "/api/app/system/maintenance", cmd, &r)
	return r, err
}

// ListRuns pages runs newest first; q holds the query parameters (status,
// playbook, since, ...), limit and cursor included.
func (c *Client) ListRuns(ctx context.Context, q url.Values) (app.RunPage, error) {
	var r app.RunPage
	err := c.Do(ctx, http.MethodGet, "/api/app/runs?"+q.Encode(), nil, &r)
	return r, err
}

// GetRun fetches one run.
func (c *Client) GetRun(ctx context.Context, id string) (app.Run, error) {
	var r app.Run
	err := c.Do(ctx, http.MethodGet, "/api/app/runs/"+url.PathEscape(id), nil, &r)
	return r, err
}

// CancelRun cancels a queued or running run.
func (c *Client) CancelRun(ctx context.Context, id string) (app.Run, error) {
	var r app.Run
	err := c.Do(ctx, http.MethodPost, "/api/app/runs/"+url.PathEscape(id)+"/cancel", struct{}{}, &r)
	return r, err
}

// RetryRun launches a failed or cancelled run again; the answer is the new run.
func (c *Client) RetryRun(ctx context.Context, id string) (app.Run, error) {
	var r app.Run
	err := c.Do(ctx, http.MethodPost, "/api/app/runs/"+url.PathEscape(id)+"/retry", struct{}{}, &r)
	return r, err
}

// ListPlaybooks pages playbooks by name.
func (c *Client) ListPlaybooks(ctx context.Context, q url.Values) (app.PlaybookPage, error) {
	var r app.PlaybookPage
	err := c.Do(ctx, http.MethodGet, "/api/app/playbooks?"+q.Encode(), nil, &r)
	return r, err
}

// GetPlaybook fetches a playbook by id or name.
func (c *Client) GetPlaybook(ctx context.Context, ref string) (app.Playbook, error) {
	var r app.Playbook
	err := c.Do(ctx, http.MethodGet, "/api/app/playbooks/"+url.PathEscape(ref), nil, &r)
	return r, err
}

// LaunchPlaybook queues a run of a playbook.
func (c *Client) LaunchPlaybook(ctx context.Context, cmd app.LaunchPlaybookCommand) (app.Run, error) {
	var r app.Run
	ref := cmd.Playbook
	cmd.Playbook = ""
	err := c.Do(ctx, http.MethodPost, "/api/app/playbooks/"+url.PathEscape(ref)+"/launch", cmd, &r)
	return r, err
}

// ListSchedules pages schedules by name.
func (c *Client) ListSchedules(ctx context.Context, q url.Values) (app.SchedulePage, error) {
	var r app.SchedulePage
	err := c.Do(ctx, http.MethodGet, "/api/app/schedules?"+q.Encode(), nil, &r)
	return r, err
}

// SetScheduleEnabled resumes (true) or pauses (false) a schedule.
func (c *Client) SetScheduleEnabled(ctx context.Context, ref string, enabled bool) (app.Schedule, error) {
	action := "disable"
	if enabled {
		action = "enable"
	}
	var r app.Schedule
	err := c.Do(ctx, http.MethodPost, "/api/app/schedules/"+url.PathEscape(ref)+"/"+action, struct{}{}, &r)
	return r, err
}
