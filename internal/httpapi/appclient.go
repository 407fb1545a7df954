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
