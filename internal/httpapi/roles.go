package httpapi

import (
	"fmt"
	"sort"
	"strings"

	"github.com/studio/operator/internal/protocol"
)

// RouteRoles is the one table from every authenticated route (its mux
// pattern: method and path) to the least role it needs. A route missing
// here is refused to everyone (a test walks the router so none is). Two
// checks go further than the table, where the role depends on the body:
// a confirm needs protocol.ConfirmRole of the proposal's risk (operator
// for mutate and execute, approver otherwise), and an application
// command of risk admin needs admin.
var RouteRoles = map[string]protocol.Role{
	"GET /metrics": protocol.RoleViewer,
	"/api/":        protocol.RoleViewer, // unknown endpoints: not_found
	"/":            protocol.RoleViewer, // the degraded API (Unavailable): service_failure

	"POST /api/operator/conversations":                              protocol.RoleAgent,
	"GET /api/operator/conversations":                               protocol.RoleViewer,
	"GET /api/operator/conversations/{id}":                          protocol.RoleViewer,
	"PATCH /api/operator/conversations/{id}":                        protocol.RoleAgent,
	"DELETE /api/operator/conversations/{id}":                       protocol.RoleOperator,
	"POST /api/operator/conversations/{id}/turns":                   protocol.RoleAgent,
	"POST /api/operator/conversations/{id}/requests/{rid}/cancel":   protocol.RoleAgent,
	"GET /api/operator/conversations/{id}/stream":                   protocol.RoleViewer,
	"POST /api/operator/stream-tickets":                             protocol.RoleViewer,
	"GET /api/operator/conversations/{id}/effects/{eid}":            protocol.RoleViewer,
	"POST /api/operator/conversations/{id}/effects/{eid}/ack":       protocol.RoleOperator,
	"POST /api/operator/conversations/{id}/proposals/{pid}/confirm": protocol.RoleOperator,
	"POST /api/operator/conversations/{id}/proposals/{pid}/deny":    protocol.RoleOperator,
	"POST /api/operator/conversations/{id}/proposals/{pid}/amend":   protocol.RoleOperator,
	"GET /api/operator/conversations/{id}/proposals":                protocol.RoleViewer,
	"GET /api/operator/conversations/{id}/proposals/{pid}":          protocol.RoleViewer,
	"GET /api/operator/proposals":                                   protocol.RoleViewer,
	"GET /api/operator/proposals/{pid}":                             protocol.RoleViewer,
	"GET /api/operator/routes":                                      protocol.RoleViewer,
	"GET /api/operator/tools":                                       protocol.RoleViewer,
	"GET /api/operator/models":                                      protocol.RoleViewer,
	"POST /api/operator/conversations/{id}/fork":                    protocol.RoleAgent,
	"POST /api/operator/conversations/{id}/restore":                 protocol.RoleOperator,
	"POST /api/operator/conversations/{id}/view":                    protocol.RoleAgent,

	"GET /api/app/events":                   protocol.RoleViewer,
	"GET /api/app/playbooks":                protocol.RoleViewer,
	"POST /api/app/playbooks":               protocol.RoleOperator,
	"GET /api/app/playbooks/{ref}":          protocol.RoleViewer,
	"PATCH /api/app/playbooks/{ref}":        protocol.RoleOperator,
	"DELETE /api/app/playbooks/{ref}":       protocol.RoleOperator,
	"POST /api/app/playbooks/{ref}/launch":  protocol.RoleOperator,
	"GET /api/app/workflows":                protocol.RoleViewer,
	"POST /api/app/workflows":               protocol.RoleOperator,
	"GET /api/app/workflows/{ref}":          protocol.RoleViewer,
	"PATCH /api/app/workflows/{ref}":        protocol.RoleOperator,
	"DELETE /api/app/workflows/{ref}":       protocol.RoleOperator,
	"POST /api/app/workflows/{ref}/launch":  protocol.RoleOperator,
	"GET /api/app/runs":                     protocol.RoleViewer,
	"POST /api/app/runs":                    protocol.RoleOperator,
	"GET /api/app/runs/stats":               protocol.RoleViewer,
	"GET /api/app/runs/activity":            protocol.RoleViewer,
	"GET /api/app/runs/{id}":                protocol.RoleViewer,
	"POST /api/app/runs/{id}/cancel":        protocol.RoleOperator,
	"POST /api/app/runs/{id}/retry":         protocol.RoleOperator,
	"GET /api/app/schedules":                protocol.RoleViewer,
	"POST /api/app/schedules":               protocol.RoleOperator,
	"GET /api/app/schedules/preview":        protocol.RoleViewer,
	"GET /api/app/schedules/{ref}":          protocol.RoleViewer,
	"PATCH /api/app/schedules/{ref}":        protocol.RoleOperator,
	"DELETE /api/app/schedules/{ref}":       protocol.RoleOperator,
	"POST /api/app/schedules/{ref}/enable":  protocol.RoleOperator,
	"POST /api/app/schedules/{ref}/disable": protocol.RoleOperator,
	"GET /api/app/system/health":            protocol.RoleViewer,
	"GET /api/app/system/operator":          protocol.RoleViewer,
	"POST /api/app/system/maintenance":      protocol.RoleAdmin,
	"GET /api/app/audit":                    protocol.RoleViewer,
	"GET /api/app/audit/actors":             protocol.RoleViewer,
	"POST /api/app/commands/{type}":         protocol.RoleOperator,

	"POST /mcp": protocol.RoleViewer, // a tools/call needs its tool's role too (mcpserver)

	"GET /api/auth/whoami":                    protocol.RoleViewer,
	"GET /api/admin/principals":               protocol.RoleAdmin,
	"POST /api/admin/principals":              protocol.RoleAdmin,
	"PATCH /api/admin/principals/{ref}":       protocol.RoleAdmin,
	"DELETE /api/admin/principals/{ref}":      protocol.RoleAdmin,
	"POST /api/admin/principals/{ref}/tokens": protocol.RoleAdmin,
	"GET /api/admin/tokens":                   protocol.RoleAdmin,
	"DELETE /api/admin/tokens/{id}":           protocol.RoleAdmin,
	"GET /api/admin/webhooks":                 protocol.RoleAdmin,
	"POST /api/admin/webhooks":                protocol.RoleAdmin,
	"DELETE /api/admin/webhooks/{id}":         protocol.RoleAdmin,
	"GET /api/admin/webhooks/{id}/deliveries": protocol.RoleAdmin,
}

// authorize refuses a principal whose role is below the route's.
func authorize(p protocol.Principal, pattern string) error {
	if pattern == "" {
		pattern = "/api/" // the edge answers /api itself, before the mux: not_found
	}
	need, ok := RouteRoles[pattern]
	if !ok {
		return protocol.Errorf(protocol.Denied, "no role may use this route").With("reason", "role").With("needed", string(protocol.RoleAdmin))
	}
	return requireRole(p, need)
}

// requireRole is RoleDenied unless p's role is at least need.
func requireRole(p protocol.Principal, need protocol.Role) error {
	if !p.Role.Allows(need) {
		return protocol.RoleDenied(p.Role, need)
	}
	return nil
}

// RoleTable is RouteRoles as a Markdown table, sorted by path then
// method: what docs/protocol.md prints.
func RoleTable() string {
	type row struct{ method, path string }
	rows := make([]row, 0, len(RouteRoles))
	for pattern := range RouteRoles {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "any", pattern
		}
		rows = append(rows, row{method, path})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].path != rows[j].path {
			return rows[i].path < rows[j].path
		}
		return rows[i].method < rows[j].method
	})
	var b strings.Builder
	b.WriteString("| Method | Path | Least role |\n|---|---|---|\n")
	for _, r := range rows {
		pattern := r.method + " " + r.path
		if r.method == "any" {
			pattern = r.path
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", r.method, r.path, RouteRoles[pattern])
	}
	return b.String()
}
