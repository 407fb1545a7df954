package openapi

import (
	"reflect"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Operation is one endpoint of the API.
type Operation struct {
	Method  string
	Path    string // the ServeMux pattern's path: /api/operator/conversations/{id}
	ID      string // operationId
	Tag     string
	Summary string
	// Auth: "bearer" (the default), "bearer-or-ticket" (the stream), or
	// "none" (health, metrics on the open listener, this document).
	Auth   string
	Query  []param
	Body   *schema // nil: no body
	Status int     // the success status
	// Resp is the success body; nil with Content "" means none.
	Resp *schema
	// Content is the success media type when it is not JSON.
	Content string
	// Approval, for a command, is the 202 answer of one sent for approval
	// (a second approver decides it; Location names its proposal).
	Approval *schema
}

type param struct {
	name, desc string
	s          *schema
}

func q(name, desc string, s *schema) param { return param{name, desc, s} }

var (
	qInt    = &schema{Type: []string{"integer"}}
	qString = &schema{Type: []string{"string"}}
	qBool   = &schema{Type: []string{"boolean"}}
)

func pageParams(extra ...param) []param {
	return append(extra, q("limit", "page size, 1 to 200 (default 50)", qInt), q("cursor", "the nextCursor of the previous page", qString))
}

// Operations is the API, in the order the document lists it.
func Operations() []Operation { return build().ops }

// model is the reflected types and the operations over them.
type model struct {
	ops        []Operation
	components map[string]*schema
}

// build is long because it is the API's table: every operation in the
// order the document lists it, read top to bottom as the document is.
func build() model {
	r := &reflector{components: map[string]*schema{}, overrides: overrides(), names: map[reflect.Type]string{
		reflect.TypeFor[protocol.Error](): "ProtocolError",
	}, enums: enums()}
	addProtocolComponents(r)
	t := func(v reflect.Type) *schema { return r.schemaOf(v) }
	// pathRef is a command's body where the path names its resource: the
	// field may be left out (and must match the path when given).
	pathRef := func(v reflect.Type, field string) *schema {
		c := *r.components[t(v).Ref]
		c.Properties = slices.Clone(c.Properties)
		for i, p := range c.Properties {
			if p.Name == field {
				c.Properties[i].Required = false
				c.Properties[i].Schema = &schema{Type: []string{"string"}, Description: "optional: the path names it"}
			}
		}
		return &c
	}
	pb, run, sched, wf := t(reflect.TypeFor[studio.Playbook]()), t(reflect.TypeFor[studio.Run]()), t(reflect.TypeFor[studio.Schedule]()), t(reflect.TypeFor[studio.Workflow]())
	result := t(reflect.TypeFor[studio.Result]())
	conv := t(reflect.TypeFor[protocol.Conversation]())
	proposalList := object(req("proposals", arrayOf(t(reflect.TypeFor[protocol.ProposalState]()))))
	decidable := q("decidable", "true: only the pending proposals the caller may confirm (its role, and four-eyes): what waits for it", qBool)
	expectedVersion := q("expectedVersion", "the resource's version as last read", qInt)
	// AG-UI's RunAgentInput: its members this daemon reads; the others
	// (state, forwardedProps beyond studio, protocolVersion) are allowed.
	anyObjects := arrayOf(&schema{Type: []string{"object"}, Open: true})
	aguiInput := object(req("threadId", str("the thread: a conversation")), req("runId", str("the run: a turn")),
		req("messages", anyObjects), opt("tools", anyObjects), opt("context", anyObjects), opt("resume", anyObjects))
	aguiInput.Open = true
	ops := []Operation{
		{Method: "GET", Path: "/healthz", ID: "healthz", Tag: "daemon", Summary: "Liveness: 200 {status: ok}, or 503 with the reason StateDB is unavailable", Auth: "none", Status: 200,
			Resp: object(req("status", enum("", "ok", "degraded")), opt("reason", str("why, for a caller with the token")))},
		{Method: "GET", Path: "/readyz", ID: "readyz", Tag: "daemon", Summary: "Readiness: 200 {status: ready}, or 503 {status: not_ready, reason} while shutting down, the database is unreachable, migrations are pending or (PostgreSQL) the lease is not held", Auth: "none", Status: 200,
			Resp: object(req("status", enum("", "ready", "not_ready")), opt("reason", str("why not ready")), opt("detail", str("the error behind the reason, for a caller with the token")))},
		{Method: "GET", Path: "/metrics", ID: "metrics", Tag: "daemon", Summary: "Prometheus text exposition (the token is required here; --metrics-addr serves it without)", Status: 200, Content: "text/plain"},
		{Method: "GET", Path: "/api/openapi.json", ID: "openapi", Tag: "daemon", Summary: "This document", Auth: "none", Status: 200, Resp: &schema{Type: []string{"object"}, Open: true}},

		{Method: "POST", Path: "/mcp", ID: "mcpPost", Tag: "mcp", Summary: "Model Context Protocol, Streamable HTTP, stateless: one JSON-RPC message in (a batch up to revision 2025-03-26), its answer out (JSON); other methods are 405 with Allow: POST. Each tools/call is decided for the caller (role, rate) and a refusal is the tool's isError result; a body that is not JSON-RPC is -32700/-32600, a method Studio does not serve -32601. A foreign Origin is 403; a refused token is 401 saying how to make and send one (docs/mcp.md)",
			Body: &schema{Type: []string{"object", "array"}, Open: true}, Status: 200, Resp: &schema{Type: []string{"object", "array"}, Open: true}},
		{Method: "POST", Path: "/api/agui", ID: "aguiRun", Tag: "agui", Summary: "AG-UI (docs/agui.md): an AG-UI RunAgentInput in (threadId a conversation, runId a turn, the last user message its instruction, resume entries answering interrupts, frontend tools navigate/select/set_theme/prefill_form), AG-UI events out as Server-Sent Events, each frame's last event with the frame's sequence as its id; the same run with Last-Event-ID gets the rest. Refusals before the run are the typed errors; a run ends with RUN_FINISHED or RUN_ERROR",
			Body: aguiInput, Status: 200, Content: "text/event-stream"},
		{Method: "GET", Path: "/.well-known/oauth-protected-resource", ID: "oauthProtectedResource", Tag: "mcp", Summary: "Where an OAuth client of MCP looks for RFC 9728 metadata: 404, Studio takes bearer tokens, not OAuth (the message says how)", Auth: "none", Status: 404},
		{Method: "GET", Path: "/.well-known/oauth-protected-resource/mcp", ID: "oauthProtectedResourceMCP", Tag: "mcp", Summary: "The path-suffixed form of the same address (RFC 9728 §3.1): 404, as above", Auth: "none", Status: 404},
		{Method: "GET", Path: "/.well-known/oauth-authorization-server", ID: "oauthAuthorizationServer", Tag: "mcp", Summary: "RFC 8414 authorization-server metadata: 404, Studio is no authorization server (the message says how to authenticate)", Auth: "none", Status: 404},
		{Method: "GET", Path: "/.well-known/openid-configuration", ID: "openidConfiguration", Tag: "mcp", Summary: "OpenID Connect discovery: 404, as above", Auth: "none", Status: 404},

		{Method: "POST", Path: "/api/operator/conversations", ID: "createConversation", Tag: "operator", Summary: "Create a conversation, owned by the caller; visibility team unless private is asked",
			Body: t(reflect.TypeFor[protocol.CreateConversationRequest]()), Status: 201, Resp: conv},
		{Method: "GET", Path: "/api/operator/conversations", ID: "listConversations", Tag: "operator", Summary: "List the conversations the caller may see (its own, the team's; admins all), pinned first, then newest first",
			Query: pageParams(q("status", "active, archived, or deleted (those still within the recovery window); default active and archived", enum("", "active", "archived", "deleted")),
				q("q", "keep the conversations whose title or turn text has every word (prefixes match); at most 200 characters", qString)),
			Status: 200, Resp: t(reflect.TypeFor[protocol.ConversationList]())},
		{Method: "GET", Path: "/api/operator/conversations/{id}", ID: "getConversation", Tag: "operator", Summary: "A conversation and one page of its frames",
			Query:  []param{q("after_sequence", "frames after this sequence (default 0)", qInt), q("limit", "frames per page, 1 to 1000 (default 200)", qInt)},
			Status: 200, Resp: t(reflect.TypeFor[protocol.ConversationPage]())},
		{Method: "PATCH", Path: "/api/operator/conversations/{id}", ID: "updateConversation", Tag: "operator", Summary: "Rename, archive or unarchive, pin, choose the model of the next turns; change the visibility (its owner or an admin)",
			Body: t(reflect.TypeFor[protocol.UpdateConversationRequest]()), Status: 200, Resp: conv},
		{Method: "DELETE", Path: "/api/operator/conversations/{id}", ID: "deleteConversation", Tag: "operator", Summary: "Mark deleted (purged later by maintenance)", Status: 200, Resp: conv},
		{Method: "POST", Path: "/api/operator/conversations/{id}/turns", ID: "submitTurn", Tag: "operator", Summary: "Submit a turn (202); conflict while one is active, stale_context on a wrong expectedLastSequence",
			Body: t(reflect.TypeFor[protocol.TurnRequest]()), Status: 202, Resp: t(reflect.TypeFor[protocol.TurnAccepted]())},
		{Method: "POST", Path: "/api/operator/conversations/{id}/requests/{rid}/cancel", ID: "cancelTurn", Tag: "operator", Summary: "Cancel a turn (idempotent); answers its state",
			Status: 200, Resp: t(reflect.TypeFor[protocol.Turn]())},
		{Method: "GET", Path: "/api/operator/conversations/{id}/stream", ID: "streamFrames", Tag: "operator", Auth: "bearer-or-ticket",
			Summary: "Server-Sent Events: `id: <sequence>` and `data: <Frame JSON>` per frame after the cursor, then live frames; comment heartbeats every 15 s",
			Query:   []param{q("after_sequence", "the cursor (default: Last-Event-ID, else 0)", qInt), q("ticket", "a one-use stream ticket instead of the bearer header", qString)},
			Status:  200, Content: "text/event-stream"},
		{Method: "POST", Path: "/api/operator/stream-tickets", ID: "createStreamTicket", Tag: "operator", Summary: "A one-use, 60-second stream credential for one conversation and cursor",
			Body: t(reflect.TypeFor[protocol.StreamTicketRequest]()), Status: 201, Resp: t(reflect.TypeFor[protocol.StreamTicket]())},
		{Method: "GET", Path: "/api/operator/conversations/{id}/effects/{eid}", ID: "getEffect", Tag: "operator",
			Summary: "An effect's current state (pending, applied, rejected, expired): a client replaying a ui_command applies it only while pending; expired also when a newer turn or the expiry made it stale",
			Status:  200, Resp: t(reflect.TypeFor[protocol.EffectState]())},
		{Method: "POST", Path: "/api/operator/conversations/{id}/effects/{eid}/ack", ID: "ackEffect", Tag: "operator", Summary: "Acknowledge a ui_command effect: applied or rejected, once",
			Body: t(reflect.TypeFor[protocol.AckEffectRequest]()), Status: 200, Resp: t(reflect.TypeFor[protocol.EffectState]())},
		{Method: "POST", Path: "/api/operator/conversations/{id}/proposals/{pid}/confirm", ID: "confirmProposal", Tag: "operator", Summary: "Confirm a proposal by its command hash (and target version): the server re-checks, audits and executes it once",
			Body: ref("ConfirmProposalRequest"), Status: 200, Resp: t(reflect.TypeFor[protocol.ProposalResult]())},
		{Method: "POST", Path: "/api/operator/conversations/{id}/proposals/{pid}/deny", ID: "denyProposal", Tag: "operator", Summary: "Deny a pending proposal",
			Body: object(), Status: 200, Resp: t(reflect.TypeFor[protocol.ProposalResult]())},
		{Method: "GET", Path: "/api/operator/conversations/{id}/proposals", ID: "listConversationProposals", Tag: "operator", Summary: "A conversation's proposals",
			Query: []param{q("status", "statuses, comma separated", qString), decidable}, Status: 200, Resp: proposalList},
		{Method: "GET", Path: "/api/operator/conversations/{id}/proposals/{pid}", ID: "getConversationProposal", Tag: "operator", Summary: "One proposal of a conversation",
			Status: 200, Resp: ref("ProposalState")},
		{Method: "GET", Path: "/api/operator/proposals", ID: "listProposals", Tag: "operator", Summary: "Proposals across conversations",
			Query: []param{q("status", "statuses, comma separated (pending, executing, succeeded, failed, expired, cancelled, conflict)", qString), decidable}, Status: 200, Resp: proposalList},
		{Method: "GET", Path: "/api/operator/proposals/{pid}", ID: "getProposal", Tag: "operator", Summary: "One proposal by id", Status: 200, Resp: ref("ProposalState")},
		{Method: "GET", Path: "/api/operator/routes", ID: "getRoutes", Tag: "operator", Summary: "The route registry: the six spaces, their params and effects, the forms",
			Status: 200, Resp: t(reflect.TypeFor[spaces.Registry]())},
		{Method: "GET", Path: "/api/operator/tools", ID: "getTools", Tag: "operator", Summary: "The tool catalog with JSON Schemas", Status: 200,
			Resp: object(req("tools", arrayOf(ref("ToolSpec"))))},
		{Method: "POST", Path: "/api/operator/conversations/{id}/fork", ID: "forkConversation", Tag: "operator",
			Summary: "Fork: a new conversation whose history is a copy of this one's frames up to a done frame (upToSequence), re-sequenced from 1; copied proposals and effects are history",
			Body:    t(reflect.TypeFor[protocol.ForkRequest]()), Status: 201, Resp: t(reflect.TypeFor[protocol.ConversationPage]())},
		{Method: "POST", Path: "/api/operator/conversations/{id}/restore", ID: "restoreConversation", Tag: "operator",
			Summary: "Restore a conversation deleted within the recovery window (audited)", Body: object(), Status: 200, Resp: conv},
		{Method: "POST", Path: "/api/operator/conversations/{id}/view", ID: "reportView", Tag: "operator",
			Summary: "Report what the operator looks at while a turn runs (best effort, kept in memory): get_current_view answers with the freshest report",
			Body:    t(reflect.TypeFor[protocol.ViewReport]()), Status: 202, Resp: t(reflect.TypeFor[protocol.ViewAccepted]())},
		{Method: "POST", Path: "/api/operator/conversations/{id}/proposals/{pid}/amend", ID: "amendProposal", Tag: "operator",
			Summary: "Replace a pending proposal with the operator's edited command: a new proposal (its own hash and audit trail) that answers the same tool call; the original becomes cancelled (amended)",
			Body:    t(reflect.TypeFor[protocol.AmendProposalRequest]()), Status: 201, Resp: ref("ProposalState")},
		{Method: "GET", Path: "/api/operator/models", ID: "listModels", Tag: "operator", Summary: "The configured models: provider, model, reachable, context limits",
			Status: 200, Resp: t(reflect.TypeFor[protocol.ModelList]())},

		{Method: "GET", Path: "/api/app/events", ID: "streamAppEvents", Tag: "app",
			Summary: "Server-Sent Events of application changes: `id: <seq>` and `data: <ChangeEvent JSON>` per committed change of a run, schedule, playbook or workflow, from every daemon; the cursor is Last-Event-ID or after (none: from now); a cursor older than the log keeps gets a reset event; comment heartbeats every 15 s",
			Query:   []param{q("after", "the cursor: the last seq seen (default: Last-Event-ID, else the newest change)", qInt)},
			Status:  200, Content: "text/event-stream"},
		{Method: "GET", Path: "/api/app/playbooks", ID: "listPlaybooks", Tag: "app", Summary: "Playbooks by name",
			Query: pageParams(q("q", "search name and description", qString), q("project", "only this project", qString)), Status: 200, Resp: t(reflect.TypeFor[studio.PlaybookPage]())},
		{Method: "POST", Path: "/api/app/playbooks", ID: "createPlaybook", Tag: "app", Summary: "Create a playbook",
			Body: t(reflect.TypeFor[studio.CreatePlaybookCommand]()), Status: 201, Resp: pb},
		{Method: "GET", Path: "/api/app/playbooks/{ref}", ID: "getPlaybook", Tag: "app", Summary: "A playbook by id or name", Status: 200, Resp: pb},
		{Method: "PATCH", Path: "/api/app/playbooks/{ref}", ID: "updatePlaybook", Tag: "app", Summary: "Update a playbook (expectedVersion required)",
			Body: pathRef(reflect.TypeFor[studio.UpdatePlaybookCommand](), "playbook"), Status: 200, Resp: pb},
		{Method: "DELETE", Path: "/api/app/playbooks/{ref}", ID: "deletePlaybook", Tag: "app", Summary: "Delete a playbook",
			Query: []param{expectedVersion}, Status: 200, Resp: result},
		{Method: "POST", Path: "/api/app/playbooks/{ref}/launch", ID: "launchPlaybook", Tag: "app", Summary: "Launch a run (202: queued)",
			Body: pathRef(reflect.TypeFor[studio.LaunchPlaybookCommand](), "playbook"), Status: 202, Resp: run},
		{Method: "GET", Path: "/api/app/workflows", ID: "listWorkflows", Tag: "app", Summary: "Workflows by name",
			Query: pageParams(q("q", "search name and description", qString), q("project", "only this project", qString)), Status: 200, Resp: t(reflect.TypeFor[studio.WorkflowPage]())},
		{Method: "POST", Path: "/api/app/workflows", ID: "createWorkflow", Tag: "app", Summary: "Create a workflow",
			Body: t(reflect.TypeFor[studio.CreateWorkflowCommand]()), Status: 201, Resp: wf},
		{Method: "GET", Path: "/api/app/workflows/{ref}", ID: "getWorkflow", Tag: "app", Summary: "A workflow by id or name", Status: 200, Resp: wf},
		{Method: "PATCH", Path: "/api/app/workflows/{ref}", ID: "updateWorkflow", Tag: "app", Summary: "Update a workflow (expectedVersion required)",
			Body: pathRef(reflect.TypeFor[studio.UpdateWorkflowCommand](), "workflow"), Status: 200, Resp: wf},
		{Method: "DELETE", Path: "/api/app/workflows/{ref}", ID: "deleteWorkflow", Tag: "app", Summary: "Delete a workflow (irreversible)",
			Query: []param{expectedVersion}, Status: 200, Resp: result},
		{Method: "POST", Path: "/api/app/workflows/{ref}/launch", ID: "launchWorkflow", Tag: "app", Summary: "Launch a workflow: one queued run per step, in order (202)",
			Body: pathRef(reflect.TypeFor[studio.LaunchWorkflowCommand](), "workflow"), Status: 202, Resp: t(reflect.TypeFor[studio.WorkflowLaunch]())},
		{Method: "GET", Path: "/api/app/runs", ID: "listRuns", Tag: "app", Summary: "Runs, newest first",
			Query: pageParams(q("status", "queued, running, succeeded, failed or cancelled", qString), q("playbook", "playbook id or name", qString),
				q("project", "only this project", qString), q("trigger", "manual, operator or schedule", qString), q("schedule", "schedule id", qString),
				q("workflow", "workflow id or name: its runs, by step", qString), q("q", "search playbook name, input and id prefix", qString),
				q("since", "Unix seconds or RFC 3339", qString), q("until", "Unix seconds or RFC 3339", qString),
				q("counts", "true: the first page carries the filtered counts by status", qBool)),
			Status: 200, Resp: t(reflect.TypeFor[studio.RunPage]())},
		{Method: "POST", Path: "/api/app/runs", ID: "launchRun", Tag: "app", Summary: "Launch a run of a playbook (202: queued)",
			Body: t(reflect.TypeFor[studio.LaunchPlaybookCommand]()), Status: 202, Resp: run},
		{Method: "GET", Path: "/api/app/runs/stats", ID: "runStats", Tag: "app", Summary: "Run counts by status and the median duration",
			Query: []param{q("window", "24h or 7d", enum("", "24h", "7d"))}, Status: 200, Resp: t(reflect.TypeFor[studio.RunStats]())},
		{Method: "GET", Path: "/api/app/runs/activity", ID: "runActivity", Tag: "app", Summary: "Runs per bucket by status between consecutive edges, and the spread of their durations",
			Query: []param{q("edges", "2 or more comma-separated Unix times, ascending (the caller's hours or days)", qString)}, Status: 200, Resp: t(reflect.TypeFor[studio.Activity]())},
		{Method: "GET", Path: "/api/app/runs/{id}", ID: "getRun", Tag: "app", Summary: "A run", Status: 200, Resp: run},
		{Method: "POST", Path: "/api/app/runs/{id}/cancel", ID: "cancelRun", Tag: "app", Summary: "Cancel a queued or running run", Body: object(), Status: 200, Resp: run},
		{Method: "POST", Path: "/api/app/runs/{id}/retry", ID: "retryRun", Tag: "app", Summary: "Launch a failed or cancelled run again (202: the new run)", Body: object(), Status: 202, Resp: run},
		{Method: "GET", Path: "/api/app/schedules", ID: "listSchedules", Tag: "app", Summary: "Schedules by name",
			Query:  pageParams(q("enabled", "true or false", qBool), q("playbook", "playbook id or name", qString), q("q", "search the name", qString)),
			Status: 200, Resp: t(reflect.TypeFor[studio.SchedulePage]())},
		{Method: "POST", Path: "/api/app/schedules", ID: "createSchedule", Tag: "app", Summary: "Create a schedule (5-field cron, UTC)",
			Body: t(reflect.TypeFor[studio.CreateScheduleCommand]()), Status: 201, Resp: sched},
		{Method: "GET", Path: "/api/app/schedules/preview", ID: "previewCron", Tag: "app", Summary: "The next run times of a cron expression",
			Query: []param{q("cron", "a 5-field cron expression", qString), q("count", "how many, up to 50 (default 5)", qInt)}, Status: 200, Resp: t(reflect.TypeFor[studio.CronPreview]())},
		{Method: "GET", Path: "/api/app/schedules/{ref}", ID: "getSchedule", Tag: "app", Summary: "A schedule by id or name", Status: 200, Resp: sched},
		{Method: "PATCH", Path: "/api/app/schedules/{ref}", ID: "updateSchedule", Tag: "app", Summary: "Update a schedule (expectedVersion required)",
			Body: pathRef(reflect.TypeFor[studio.UpdateScheduleCommand](), "schedule"), Status: 200, Resp: sched},
		{Method: "DELETE", Path: "/api/app/schedules/{ref}", ID: "deleteSchedule", Tag: "app", Summary: "Delete a schedule", Query: []param{expectedVersion}, Status: 200, Resp: result},
		{Method: "POST", Path: "/api/app/schedules/{ref}/enable", ID: "enableSchedule", Tag: "app", Summary: "Resume a schedule",
			Body: ref("SetEnabledRequest"), Status: 200, Resp: sched},
		{Method: "POST", Path: "/api/app/schedules/{ref}/disable", ID: "disableSchedule", Tag: "app", Summary: "Pause a schedule",
			Body: ref("SetEnabledRequest"), Status: 200, Resp: sched},
		{Method: "GET", Path: "/api/app/system/health", ID: "systemHealth", Tag: "app", Summary: "The doctor report",
			Query:  []param{q("part", "work: only the work in flight (runs, schedules, the operator's turns and proposals), without the database quick check and the model check", qString)},
			Status: 200, Resp: t(reflect.TypeFor[studio.DoctorReport]())},
		{Method: "GET", Path: "/api/app/system/operator", ID: "operatorActivity", Tag: "app", Summary: "The operator's recent turns and model errors per interval, from this daemon's memory",
			Query: []param{q("window", "1h (5-minute intervals, the default) or 24h (hours)", enum("", "1h", "24h"))}, Status: 200, Resp: t(reflect.TypeFor[protocol.OperatorActivity]())},
		{Method: "POST", Path: "/api/app/system/maintenance", ID: "runMaintenance", Tag: "app", Summary: "Run one maintenance action",
			Body: t(reflect.TypeFor[studio.RunMaintenanceCommand]()), Status: 200, Resp: t(reflect.TypeFor[studio.MaintenanceResult]())},
		{Method: "GET", Path: "/api/app/audit", ID: "listAudit", Tag: "app", Summary: "The audit trail, newest first",
			Query: pageParams(q("action", "only this action", qString), q("targetId", "only this target", qString),
				q("actor", "studio_cockpit, studio_cli, studio_operator, studio_scheduler, studio_system or a principal's name", qString), q("commandType", "only this command type", qString),
				q("target", "the row's target id, or a resource or proposal id its details name", qString),
				q("since", "Unix seconds or RFC 3339 (inclusive)", qString), q("until", "Unix seconds or RFC 3339 (exclusive)", qString)),
			Status: 200, Resp: t(reflect.TypeFor[studio.AuditPage]())},
		{Method: "GET", Path: "/api/app/audit/actors", ID: "listAuditActors", Tag: "app", Summary: "Who appears in the audit trail, by name: principals and the daemon's own actors (the values of listAudit's actor filter)",
			Status: 200, Resp: object(req("actors", arrayOf(&schema{Type: []string{"string"}})))},
		{Method: "POST", Path: "/api/app/commands/{type}", ID: "executeCommand", Tag: "app", Summary: "Execute any application command by its type id; the body is the command",
			Body: &schema{Type: []string{"object"}, Open: true}, Status: 200, Resp: result},
		{Method: "GET", Path: "/api/auth/whoami", ID: "whoami", Tag: "admin", Summary: "The principal the bearer token belongs to: id, name, role, and the risks and impacts whose proposals need a second approver",
			Status: 200, Resp: t(reflect.TypeFor[protocol.Whoami]())},
		{Method: "GET", Path: "/api/admin/principals", ID: "listPrincipals", Tag: "admin", Summary: "Every principal, disabled ones included, by name (admin)",
			Status: 200, Resp: object(req("principals", arrayOf(t(reflect.TypeFor[protocol.PrincipalView]()))))},
		{Method: "POST", Path: "/api/admin/principals", ID: "createPrincipal", Tag: "admin", Summary: "Add a principal with a role (admin); its tokens are made separately",
			Body: t(reflect.TypeFor[protocol.CreatePrincipalRequest]()), Status: 201, Resp: t(reflect.TypeFor[protocol.PrincipalView]())},
		{Method: "PATCH", Path: "/api/admin/principals/{ref}", ID: "updatePrincipal", Tag: "admin", Summary: "Change a principal's role (admin); the last admin stays admin",
			Body: t(reflect.TypeFor[protocol.UpdatePrincipalRequest]()), Status: 200, Resp: t(reflect.TypeFor[protocol.PrincipalView]())},
		{Method: "DELETE", Path: "/api/admin/principals/{ref}", ID: "disablePrincipal", Tag: "admin", Summary: "Disable a principal for good and revoke its tokens (admin); its name stays taken",
			Status: 200, Resp: t(reflect.TypeFor[protocol.PrincipalView]())},
		{Method: "PUT", Path: "/api/admin/principals/{ref}/link", ID: "linkPrincipal", Tag: "admin",
			Summary: "Link a sign-in proxy's user to a local principal (admin): that user then signs in as it; audited",
			Body:    t(reflect.TypeFor[protocol.LinkPrincipalRequest]()), Status: 200, Resp: t(reflect.TypeFor[protocol.PrincipalView]())},
		{Method: "DELETE", Path: "/api/admin/principals/{ref}/link", ID: "unlinkPrincipal", Tag: "admin",
			Summary: "Remove a local principal's proxy link (admin): the proxy user no longer signs in as it; audited",
			Status:  200, Resp: t(reflect.TypeFor[protocol.PrincipalView]())},
		{Method: "POST", Path: "/api/admin/principals/{ref}/tokens", ID: "createToken", Tag: "admin", Summary: "A new personal token (stu_…), shown in this answer only (admin)",
			Body: t(reflect.TypeFor[protocol.CreateTokenRequest]()), Status: 201, Resp: t(reflect.TypeFor[protocol.NewTokenView]())},
		{Method: "GET", Path: "/api/admin/tokens", ID: "listTokens", Tag: "admin", Summary: "Tokens by prefix, newest first; never the tokens themselves (admin)",
			Query: []param{q("principal", "only this principal's (name or id)", qString)}, Status: 200, Resp: object(req("tokens", arrayOf(t(reflect.TypeFor[protocol.TokenView]()))))},
		{Method: "DELETE", Path: "/api/admin/tokens/{id}", ID: "revokeToken", Tag: "admin", Summary: "Revoke a token (admin): refused from the next request on, on every daemon",
			Status: 200, Resp: t(reflect.TypeFor[protocol.TokenView]())},
		{Method: "POST", Path: "/api/admin/policy/explain", ID: "explainPolicy", Tag: "admin",
			Summary: "What the daemon's policies decide for a principal, an action and a resource, with the policies that decided it; records and changes nothing (admin)",
			Body:    t(reflect.TypeFor[policy.ExplainRequest]()), Status: 200, Resp: t(reflect.TypeFor[policy.Explanation]())},
		{Method: "GET", Path: "/api/admin/webhooks", ID: "listWebhooks", Tag: "admin", Summary: "The webhooks, oldest first; never their secrets (admin)",
			Status: 200, Resp: object(req("webhooks", arrayOf(t(reflect.TypeFor[protocol.Webhook]()))))},
		{Method: "POST", Path: "/api/admin/webhooks", ID: "createWebhook", Tag: "admin",
			Summary: "Add a webhook: an http(s) URL, events (proposal.pending, proposal.decided, turn.failed, run.failed), format standard or slack; its signing secret (whsec_…) is in this answer only (admin)",
			Body:    t(reflect.TypeFor[protocol.CreateWebhookRequest]()), Status: 201, Resp: t(reflect.TypeFor[protocol.NewWebhook]())},
		{Method: "DELETE", Path: "/api/admin/webhooks/{id}", ID: "removeWebhook", Tag: "admin", Summary: "Remove a webhook (admin): no new deliveries; its pending ones fail",
			Status: 200, Resp: object(req("webhook", t(reflect.TypeFor[protocol.Webhook]())))},
		{Method: "GET", Path: "/api/admin/webhooks/{id}/deliveries", ID: "listWebhookDeliveries", Tag: "admin", Summary: "A webhook's deliveries, newest first: status, attempts, the receiver's last answer (admin)",
			Query: []param{q("limit", "at most this many, 1 to 1000 (default 100)", qInt)}, Status: 200, Resp: object(req("deliveries", arrayOf(t(reflect.TypeFor[protocol.WebhookDelivery]()))))},
	}
	for _, c := range []any{studio.RetryRunCommand{}, studio.CancelRunCommand{}, studio.SetScheduleEnabledCommand{}, studio.DeletePlaybookCommand{},
		studio.DeleteScheduleCommand{}, studio.ReconcileProposalCommand{}} {
		t(reflect.TypeOf(c)) // every command's body, for POST /api/app/commands/{type}
	}
	approval := t(reflect.TypeFor[protocol.ApprovalRequest]())
	for i := range ops {
		if ops[i].Auth == "" {
			ops[i].Auth = "bearer"
		}
		// Every change of the application API is a command: one that
		// needs a second approver is sent for approval instead.
		if strings.HasPrefix(ops[i].Path, "/api/app/") && ops[i].Method != "GET" {
			ops[i].Approval = approval
		}
	}
	return model{ops: ops, components: r.components}
}

// overrides are the types whose JSON is written by hand.
func overrides() map[reflect.Type]*schema {
	anyJSON := &schema{Any: true}
	return map[reflect.Type]*schema{
		reflect.TypeFor[jsontext.Value]():                  anyJSON,
		reflect.TypeFor[map[string]any]():                  mapOf(anyJSON),
		reflect.TypeFor[protocol.Effect]():                 ref("Effect"),
		reflect.TypeFor[protocol.ResourceVersion]():        ref("ResourceVersion"),
		reflect.TypeFor[protocol.RawFrame]():               ref("Frame"),
		reflect.TypeFor[protocol.ConfirmProposalRequest](): ref("ConfirmProposalRequest"),
	}
}

// enums give string fields their allowed values ("Type.Field").
func enums() map[string][]string {
	codes := make([]string, len(protocol.ErrorCodes))
	for i, c := range protocol.ErrorCodes {
		codes[i] = string(c)
	}
	m := map[string][]string{
		"ContextSnapshot.Space":            protocol.Spaces,
		"TurnRequest.Client":               clientKinds(),
		"Conversation.Status":              {"active", "archived", "deleted"},
		"Turn.Status":                      {"queued", "running", "awaiting_confirmation", "completed", "failed", "cancelled"},
		"TextPayload.Format":               {"plain", "markdown"},
		"TextPayload.Role":                 {protocol.RoleUser, protocol.RoleAssistant},
		"ToolCallPayload.Mode":             {"read", "draft"},
		"ConfirmationPayload.State":        {"required", "confirmed", "expired", "executed", "denied", "failed"},
		"DonePayload.Outcome":              {"completed", "failed", "cancelled"},
		"CommandProposal.Risk":             {protocol.RiskMutate, protocol.RiskExecute, protocol.RiskAdmin},
		"CommandProposal.Origin":           {protocol.ProposalOriginTurn, protocol.ProposalOriginRequest},
		"ProposalState.Status":             {"pending", "confirmed", "executing", "succeeded", "failed", "expired", "cancelled", "conflict"},
		"ProposalResult.Status":            {"succeeded", "failed", "conflict", "expired", "cancelled", "executing"},
		"EffectState.Status":               {"pending", "applied", "rejected", "expired"},
		"AckEffectRequest.Status":          {"applied", "rejected"},
		"AckEffectRequest.RejectionCode":   protocol.RejectionCodes,
		"PrincipalView.Origin":             {string(protocol.OriginLocal), string(protocol.OriginProxy)},
		"Principal.Origin":                 {string(protocol.OriginLocal), string(protocol.OriginProxy)},
		"Run.Status":                       {"queued", "running", "succeeded", "failed", "cancelled"},
		"Run.Trigger":                      {"manual", "operator", "schedule"},
		"DoctorReport.Status":              {studio.StatusOK, studio.StatusDegraded, studio.StatusFailing},
		"UpdateConversationRequest.Status": {"active", "archived"},
		"Webhook.Format":                   {"standard", "slack"},
		"CreateWebhookRequest.Format":      {"standard", "slack"},
		"WebhookDelivery.Status":           {"pending", "delivered", "failed"},
		"WebhookDelivery.Event":            {"proposal.pending", "proposal.decided", "turn.failed", "run.failed"},
		"ChangeEvent.Type": {store.ChangeRunCreated, store.ChangeRunChanged, store.ChangeScheduleChanged, store.ChangePlaybookChanged,
			store.ChangeWorkflowChanged, studio.ChangeReset},
	}
	// A conversation's visibility, wherever it is read or written.
	for _, f := range []string{"Conversation.Visibility", "CreateConversationRequest.Visibility", "UpdateConversationRequest.Visibility"} {
		m[f] = []string{protocol.VisibilityPrivate, protocol.VisibilityTeam}
	}
	return m
}

// clientKinds are the values of a turn's client.
func clientKinds() []string {
	out := make([]string, len(protocol.ClientKinds))
	for i, k := range protocol.ClientKinds {
		out[i] = string(k)
	}
	return out
}

// addProtocolComponents adds the hand-written schemas: the frame union, its
// payloads, effects, versions and the error body.
func addProtocolComponents(r *reflector) {
	c := r.components
	codes := make([]string, len(protocol.ErrorCodes))
	for i, code := range protocol.ErrorCodes {
		codes[i] = string(code)
	}
	r.enums["Error.Code"] = codes
	r.schemaOf(reflect.TypeFor[protocol.Error]())
	r.schemaOf(reflect.TypeFor[studio.ChangeEvent]()) // the data of GET /api/app/events
	c["ErrorBody"] = object(req("error", ref("ProtocolError")))
	c["ResourceVersion"] = object(req("kind", str("resource kind: playbook, workflow, run, schedule, proposal")), req("id", str("")),
		req("version", &schema{Type: []string{"integer"}, Description: "the resource's version (opaque: compare for equality). Frames stored before versions were integers hold a decimal string."}))
	c["ConfirmProposalRequest"] = object(req("expectedCommandHash", str("the proposal's commandHash as shown")),
		opt("expectedTargetVersion", &schema{Type: []string{"integer", "string"}, Nullable: true, Description: "the target's version as shown; its string form is accepted"}))
	c["SetEnabledRequest"] = object(opt("expectedVersion", &schema{Type: []string{"integer"}, Description: "the schedule's version as last read"}))
	c["ToolSpec"] = object(req("id", str("")), req("title", str("")), req("description", str("")),
		req("executionClass", enum("read, navigate and draft run during the turn; mutate, execute and admin only ever become proposals", "read", "navigate", "draft", "mutate", "execute", "admin")),
		req("applicationOperation", str("the application query, cockpit effect or command type the tool maps to")),
		req("inputSchema", &schema{Type: []string{"object"}, Open: true, Description: "JSON Schema of the input"}),
		opt("outputSchema", &schema{Type: []string{"object"}, Open: true, Description: "JSON Schema of a read tool's result"}))

	params := mapOf(&schema{OneOf: []*schema{{Type: []string{"string"}}, {Type: []string{"integer"}}, {Type: []string{"boolean"}}, arrayOf(&schema{Type: []string{"string"}})}})
	c["NavigateEffect"] = object(req("kind", constant("navigate")), req("space", enum("", protocol.Spaces...)), req("params", params))
	c["SelectEffect"] = object(req("kind", constant("select")), req("space", enum("", protocol.SelectableSpaces...)), req("selection", mapOf(&schema{Type: []string{"string"}})))
	c["PrefillEffect"] = object(req("kind", constant("prefill")), req("form", enum("", protocol.Forms...)), req("values", mapOf(&schema{Any: true})))
	c["ThemeEffect"] = object(req("kind", constant("theme")), req("theme", enum("", protocol.Themes...)))
	c["Effect"] = &schema{OneOf: []*schema{ref("NavigateEffect"), ref("SelectEffect"), ref("PrefillEffect"), ref("ThemeEffect")}, Discrim: "kind",
		Description: "A declarative cockpit effect (docs/protocol.md §3); clients never apply an unknown kind."}

	payloads := []struct {
		typ  protocol.FrameType
		name string
		t    reflect.Type
	}{
		{protocol.FrameText, "Text", reflect.TypeFor[protocol.TextPayload]()},
		{protocol.FrameToolCall, "ToolCall", reflect.TypeFor[protocol.ToolCallPayload]()},
		{protocol.FrameToolResult, "ToolResult", reflect.TypeFor[protocol.ToolResultPayload]()},
		{protocol.FrameUICommand, "UICommand", reflect.TypeFor[protocol.UICommandPayload]()},
		{protocol.FrameProposal, "Proposal", reflect.TypeFor[protocol.ProposalPayload]()},
		{protocol.FrameConfirmation, "Confirmation", reflect.TypeFor[protocol.ConfirmationPayload]()},
		{protocol.FrameError, "Error", reflect.TypeFor[protocol.ErrorPayload]()},
		{protocol.FrameDone, "Done", reflect.TypeFor[protocol.DonePayload]()},
	}
	var frames []*schema
	for _, p := range payloads {
		r.schemaOf(p.t)
		name := p.name + "Frame"
		c[name] = object(req("version", constant(protocol.Version)), req("conversationId", str("")), req("requestId", str("")),
			req("sequence", &schema{Type: []string{"integer"}, Minimum: ptr(int64(1))}), req("type", constant(string(p.typ))),
			req("payload", ref(p.t.Name())), req("createdAt", &schema{Type: []string{"number"}, Description: "Unix seconds"}))
		frames = append(frames, ref(name))
	}
	c["Frame"] = &schema{OneOf: frames, Discrim: "type",
		Description: "The version-1 frame envelope (docs/protocol.md §3). An unknown version or type is a protocol error: never apply it best-effort."}
}

func ptr[T any](v T) *T { return &v }
