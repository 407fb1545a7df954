package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// The authorization matrix: every door (each HTTP route, each MCP tool
// alone and in a JSON-RPC batch, AG-UI runs, CLI commands, stream tickets
// minted and redeemed, bearer streams) × every action × every role × the principal's
// own, the team's and another principal's private resources, asked of the
// built binary over real HTTP and compared with policy.Decide itself, on
// SQLite and on PostgreSQL. A route the daemon serves or a tool it offers
// without a policy action, or one this matrix has no case for, fails it.

// matrixScript makes one pending proposal per instruction: a delete in
// project prod (mutate, irreversible), a launch in prod (execute), a
// vacuum (admin).
const matrixScript = `{"turns":[
 {"match":"delete","steps":[{"tool":"delete_schedule","arguments":{"schedule":"prod-nightly"}},{"text":"decided"}]},
 {"match":"launch","steps":[{"tool":"launch_playbook","arguments":{"playbook":"prod-audit","input":"x"}},{"text":"decided"}]},
 {"match":"vacuum","steps":[{"tool":"run_maintenance","arguments":{"action":"vacuum"}},{"text":"decided"}]},
 {"steps":[{"text":"ok"}]}]}`

var matrixInstructions = []string{"delete the prod schedule", "launch prod", "vacuum"}

// matrixLevels is the daemon's --second-approver-for in the matrix.
var matrixLevels = []string{"destructive"}

// verdict is what a door answered, as the policy sees it.
type verdict struct {
	kind   string // allowed, hidden (not_found as for a missing one), denied, approval (sent for approval: 202)
	reason string // a denial's details.reason ("" when the door cannot say: the CLI)
}

func (o verdict) String() string {
	if o.reason != "" {
		return o.kind + "(" + o.reason + ")"
	}
	return o.kind
}

// step is one question a door asks: hide makes a refusal not_found.
type step struct {
	action policy.Action
	res    policy.Resource
	hide   bool
}

// matrixCase is one request through one door for one principal.
type matrixCase struct {
	door  string
	name  string
	who   *matrixPrincipal
	steps []step
	run   func(t *testing.T) verdict
}

type matrixPrincipal struct {
	protocol.Principal
	token string
}

// convFixture is a conversation with one pending proposal, as policies
// see them.
type convFixture struct {
	conv      policy.Conversation
	prop      policy.Proposal
	requestID string
}

type matrixFixture struct {
	d          *daemon
	engine     *policy.Engine
	owner      string // the owner's token
	principals []*matrixPrincipal
	own        map[string][]convFixture // by principal name
	team       []convFixture            // q's, team
	private    []convFixture            // q's, private
	runID      string
	projects   map[string]string // playbook, workflow and schedule names → project
	tools      []*matrixTool
}

type matrixTool struct {
	name   string
	action policy.Action
}

func TestProcessPolicyMatrixSQLite(t *testing.T) {
	t.Parallel()
	runPolicyMatrix(t)
}

func TestProcessPolicyMatrixPostgres(t *testing.T) {
	t.Parallel()
	srv := postgresServer(t)
	runPolicyMatrix(t, "--database", srv.NewDatabase(t, ""))
}

func runPolicyMatrix(t *testing.T, args ...string) {
	team, err := os.ReadFile("../../docs/examples/team-policy.cedar")
	if err != nil {
		t.Fatal(err)
	}
	teamPath := filepath.Join(t.TempDir(), "team.cedar")
	if err := os.WriteFile(teamPath, team, 0o600); err != nil {
		t.Fatal(err)
	}
	engine, err := policy.New(policy.Options{SecondApproverFor: matrixLevels, Files: []policy.File{{Name: teamPath, Text: team}}})
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, append([]string{"--model", "script:" + writeScript(t, matrixScript),
		"--second-approver-for", strings.Join(matrixLevels, ","), "--policy", teamPath,
		"--mcp-calls-per-minute", "100000", "--mcp-call-burst", "100000"}, args...)...)
	f := newMatrixFixture(t, d, engine)
	cases := f.cases(t, dataDir)

	disagreements, byDoor, byVerdict, actions := 0, map[string]int{}, map[string]int{}, map[policy.Action]bool{}
	for _, c := range cases {
		want := expect(engine, c.who.Principal, c.door, c.steps)
		got := c.run(t)
		byDoor[c.door]++
		byVerdict[want.String()]++
		for _, s := range c.steps {
			actions[s.action] = true
		}
		// A command sent for approval may still be refused by its own
		// checks (a stale expectedVersion): then the door says allowed.
		agree := got.kind == want.kind || want.kind == "approval" && got.kind == "allowed"
		if !agree || got.reason != "" && got.reason != want.reason {
			disagreements++
			t.Errorf("%s %s as %s (%s): the door answered %v, the policy decides %v", c.door, c.name, c.who.Name, c.who.Role, got, want)
		}
	}
	for _, spec := range policy.Actions {
		if spec.Action != policy.ActAlone && !actions[spec.Action] {
			t.Errorf("no door of the matrix asks %s", spec.Action)
		}
	}
	t.Logf("policy matrix: %d cases (%v; %v), %d disagreements", len(cases), byDoor, byVerdict, disagreements)
}

// expect is what the doors must answer: the first refusing step decides,
// as not_found when it is a read the door hides behind.
func expect(e *policy.Engine, p protocol.Principal, door string, steps []step) verdict {
	d := policy.Context{Door: policy.DoorHTTP}
	if strings.HasPrefix(door, "mcp") {
		d.Door = policy.DoorMCP
	}
	for _, s := range steps {
		dec := e.Decide(p, s.action, s.res, d)
		switch {
		case dec.Allowed():
		case s.hide:
			return verdict{kind: "hidden"}
		case dec.Effect == policy.EffectObligation:
			return verdict{kind: "approval"} // the door meets the obligation: an approval request
		default:
			return verdict{kind: "denied", reason: dec.Reason}
		}
	}
	return verdict{kind: "allowed"}
}

func newMatrixFixture(t *testing.T, d *daemon, engine *policy.Engine) *matrixFixture {
	t.Helper()
	ctx := testCtx(t)
	token, err := os.ReadFile(filepath.Join(d.dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &matrixFixture{d: d, engine: engine, owner: strings.TrimSpace(string(token)), own: map[string][]convFixture{},
		projects: map[string]string{"audit-repo": "default", "wf": "default"}}
	admin := d.client
	if _, err := admin.CreatePlaybook(ctx, studio.CreatePlaybookCommand{Name: "prod-audit", Project: "prod", Prompt: "Audit {{input}}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateSchedule(ctx, studio.CreateScheduleCommand{Name: "prod-nightly", Cron: "0 3 * * *", Playbook: "prod-audit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkflow(ctx, studio.CreateWorkflowCommand{Name: "wf", Steps: []studio.WorkflowStepInput{{Playbook: "prod-audit"}}}); err != nil {
		t.Fatal(err)
	}
	f.projects["prod-audit"], f.projects["prod-nightly"] = "prod", "prod"
	run, err := admin.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "x", Args: map[string]string{"repo": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	f.runID = run.ID
	testutil.Eventually(t, func() bool { // a finished run: cancel and retry answer without running anything
		r, err := admin.GetRun(ctx, run.ID)
		return err == nil && (r.Status == "succeeded" || r.Status == "failed")
	})

	principal := func(name string, role protocol.Role) *matrixPrincipal {
		if _, err := admin.CreatePrincipal(ctx, name, role); err != nil {
			t.Fatal(err)
		}
		tok, err := admin.CreateToken(ctx, name, "")
		if err != nil {
			t.Fatal(err)
		}
		return &matrixPrincipal{Principal: protocol.Principal{Name: name, Role: role}, token: tok.Token}
	}
	converse := func(p *matrixPrincipal, visibility string) []convFixture {
		c := apiclient.New(d.URL, p.token, nil)
		var out []convFixture
		for _, instruction := range matrixInstructions {
			conv, err := c.CreateConversation(ctx, protocol.CreateConversationRequest{Visibility: &visibility})
			if err != nil {
				t.Fatal(err)
			}
			acc, err := c.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: instruction,
				Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: ptr(int64(0))})
			if err != nil {
				t.Fatal(err)
			}
			var st protocol.ProposalState
			testutil.Eventually(t, func() bool {
				ps, err := admin.Proposals(ctx, "pending")
				for _, p := range ps {
					if p.ConversationID == conv.ID {
						st = p
					}
				}
				return err == nil && st.ID != ""
			})
			pc := policy.Conversation{ID: conv.ID, Owner: p.Name, Visibility: visibility}
			prop := policy.Proposal{ID: st.ID, CommandType: st.CommandType, Risk: st.Risk, Impact: st.Impact, Author: st.SubmittedBy,
				Conversation: &pc}
			if st.Target != nil {
				prop.TargetKind = st.Target.Kind
				prop.Project = "prod" // the script's delete and launch are prod's
			}
			out = append(out, convFixture{conv: pc, prop: prop, requestID: acc.RequestID})
		}
		return out
	}
	q := principal("q", protocol.RoleOperator)
	f.team = converse(q, protocol.VisibilityTeam)
	f.private = converse(q, protocol.VisibilityPrivate)
	for _, role := range protocol.Roles {
		p := principal("p-"+string(role), protocol.RoleOperator) // to converse first
		f.own[p.Name] = converse(p, protocol.VisibilityTeam)
		if _, err := admin.SetPrincipalRole(ctx, p.Name, role); err != nil {
			t.Fatal(err)
		}
		p.Role = role
		f.principals = append(f.principals, p)
	}

	// The tools the daemon offers, each with the action its calls ask.
	var list struct {
		Result struct {
			Tools []struct {
				Name string         `json:"name"`
				Meta map[string]any `json:"_meta"`
			} `json:"tools"`
		} `json:"result"`
	}
	_, body := f.mcpPost(t, f.owner, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, "tools/list", "", false)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Result.Tools) == 0 {
		t.Fatalf("tools/list: %v %s", err, body)
	}
	for _, tl := range list.Result.Tools {
		a, _ := tl.Meta[mcpserver.PolicyActionMeta].(string)
		if _, known := policy.SpecOf(policy.Action(a)); !known {
			t.Errorf("MCP tool %s names no policy action (_meta %v)", tl.Name, tl.Meta)
			continue
		}
		f.tools = append(f.tools, &matrixTool{name: tl.Name, action: policy.Action(a)})
	}
	return f
}

func ptr[T any](v T) *T { return &v }

// variants are the conversations a principal's cases act on: its own,
// the team's (q's) and another's private (q's).
func (f *matrixFixture) variants(p *matrixPrincipal) map[string][]convFixture {
	return map[string][]convFixture{"own": f.own[p.Name], "team": f.team, "private": f.private}
}

// call sends one request and classifies its answer: hidden when it is the
// not_found of one of ids (a conversation or proposal that exists).
func (f *matrixFixture) call(t *testing.T, token, method, path string, body any, ids ...string) verdict {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, f.d.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return verdict{kind: "allowed"} // a stream began: leave it
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted && strings.HasPrefix(resp.Header.Get("Location"), "/api/operator/proposals/") {
		return verdict{kind: "approval"}
	}
	return classify(resp.StatusCode, b, ids)
}

func classify(status int, body []byte, ids []string) verdict {
	var eb struct {
		Error *protocol.Error `json:"error"`
	}
	if json.Unmarshal(body, &eb) != nil || eb.Error == nil {
		return verdict{kind: "allowed"}
	}
	switch {
	case status == http.StatusForbidden && eb.Error.Code == protocol.Denied:
		reason, _ := eb.Error.Details["reason"].(string)
		return verdict{kind: "denied", reason: reason}
	case status == http.StatusNotFound:
		for _, id := range ids {
			if strings.Contains(eb.Error.Message, id+" not found") {
				return verdict{kind: "hidden"}
			}
		}
	}
	return verdict{kind: "allowed"}
}

// bogus is a body every route refuses (validation) once it reads it: an
// allowed request changes nothing.
var bogus = map[string]any{"__matrix": 1}

func fill(path string, vals map[string]string) string {
	for k, v := range vals {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
	}
	return path
}

// cases builds every case; a route the daemon serves without one fails.
func (f *matrixFixture) cases(t *testing.T, dataDir string) []matrixCase {
	var out []matrixCase
	f.checkServedRoutes(t)
	patterns := make([]string, 0, len(httpapi.RouteActions))
	for p := range httpapi.RouteActions {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range f.principals {
		for _, pattern := range patterns {
			cs := f.httpCases(t, p, pattern)
			if cs == nil {
				t.Errorf("the matrix has no case for route %q", pattern)
			}
			out = append(out, cs...)
		}
		out = append(out, f.ticketCases(p)...)
		out = append(out, f.mcpCases(p)...)
		out = append(out, f.cliCases(t, p, dataDir)...)
	}
	return out
}

// checkServedRoutes fails for an operation of the daemon's OpenAPI
// document that has no policy action.
func (f *matrixFixture) checkServedRoutes(t *testing.T) {
	resp, err := http.Get(f.d.URL + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Paths) == 0 {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			pattern := strings.ToUpper(method) + " " + path
			if _, ok := httpapi.RouteActions[pattern]; !ok && !strings.HasPrefix(path, "/api/openapi") && path != "/healthz" && path != "/readyz" &&
				!strings.HasPrefix(path, "/.well-known/") {
				t.Errorf("the daemon serves %s without a policy action", pattern)
			}
		}
	}
}

// commandCase is an application command of a route, as a body and as the
// policy's resource.
type commandCase struct {
	path, method string
	body         any
	cmdType      string
	cmdBody      string // the command, as /api/app/commands/{type} takes it
	targetKind   string
	project      string
}

// commandCases are the direct commands: each decided, and none changes
// anything that later cases read (versions that do not match, names taken,
// four-eyes for deletes).
func (f *matrixFixture) commandCases() map[string][]commandCase {
	run := f.runID
	v := `"expectedVersion":999`
	return map[string][]commandCase{
		"POST /api/app/playbooks":               {{"/api/app/playbooks", "POST", jsonBody(`{"name":"audit-repo","prompt":"x"}`), "create_playbook", `{"name":"audit-repo","prompt":"x"}`, "", "default"}},
		"PATCH /api/app/playbooks/{ref}":        {{"/api/app/playbooks/prod-audit", "PATCH", jsonBody(`{` + v + `,"prompt":"y"}`), "update_playbook", `{"playbook":"prod-audit",` + v + `,"prompt":"y"}`, "playbook", "prod"}},
		"DELETE /api/app/playbooks/{ref}":       {{"/api/app/playbooks/audit-repo?expectedVersion=999", "DELETE", nil, "delete_playbook", `{"playbook":"audit-repo",` + v + `}`, "playbook", "default"}},
		"POST /api/app/playbooks/{ref}/launch":  {{"/api/app/playbooks/prod-audit/launch", "POST", jsonBody(`{"input":"x"}`), "launch_playbook", `{"playbook":"prod-audit","input":"x"}`, "playbook", "prod"}},
		"POST /api/app/workflows":               {{"/api/app/workflows", "POST", jsonBody(`{"name":"wf","steps":[{"playbook":"audit-repo"}]}`), "create_workflow", `{"name":"wf","steps":[{"playbook":"audit-repo"}]}`, "", "default"}},
		"PATCH /api/app/workflows/{ref}":        {{"/api/app/workflows/wf", "PATCH", jsonBody(`{` + v + `,"description":"d"}`), "update_workflow", `{"workflow":"wf",` + v + `,"description":"d"}`, "workflow", "default"}},
		"DELETE /api/app/workflows/{ref}":       {{"/api/app/workflows/wf?expectedVersion=999", "DELETE", nil, "delete_workflow", `{"workflow":"wf",` + v + `}`, "workflow", "default"}},
		"POST /api/app/workflows/{ref}/launch":  {{"/api/app/workflows/wf/launch", "POST", jsonBody(`{` + v + `}`), "launch_workflow", `{"workflow":"wf",` + v + `}`, "workflow", "default"}},
		"POST /api/app/runs":                    {{"/api/app/runs", "POST", jsonBody(`{"playbook":"prod-audit","input":"x"}`), "launch_playbook", `{"playbook":"prod-audit","input":"x"}`, "playbook", "prod"}},
		"POST /api/app/runs/{id}/cancel":        {{"/api/app/runs/" + run + "/cancel", "POST", nil, "cancel_run", `{"run":"` + run + `"}`, "run", "default"}},
		"POST /api/app/runs/{id}/retry":         {{"/api/app/runs/" + run + "/retry", "POST", nil, "retry_run", `{"run":"` + run + `"}`, "run", "default"}},
		"POST /api/app/schedules":               {{"/api/app/schedules", "POST", jsonBody(`{"name":"prod-nightly","cron":"0 3 * * *","playbook":"prod-audit"}`), "create_schedule", `{"name":"prod-nightly","cron":"0 3 * * *","playbook":"prod-audit"}`, "", "prod"}},
		"PATCH /api/app/schedules/{ref}":        {{"/api/app/schedules/prod-nightly", "PATCH", jsonBody(`{` + v + `,"cron":"0 4 * * *"}`), "update_schedule", `{"schedule":"prod-nightly",` + v + `,"cron":"0 4 * * *"}`, "schedule", "prod"}},
		"DELETE /api/app/schedules/{ref}":       {{"/api/app/schedules/prod-nightly?expectedVersion=999", "DELETE", nil, "delete_schedule", `{"schedule":"prod-nightly",` + v + `}`, "schedule", "prod"}},
		"POST /api/app/schedules/{ref}/enable":  {{"/api/app/schedules/prod-nightly/enable", "POST", jsonBody(`{` + v + `}`), "set_schedule_enabled", `{"schedule":"prod-nightly","enabled":true,` + v + `}`, "schedule", "prod"}},
		"POST /api/app/schedules/{ref}/disable": {{"/api/app/schedules/prod-nightly/disable", "POST", jsonBody(`{` + v + `}`), "set_schedule_enabled", `{"schedule":"prod-nightly","enabled":false,` + v + `}`, "schedule", "prod"}},
		"POST /api/app/system/maintenance":      {{"/api/app/system/maintenance", "POST", jsonBody(`{"action":"integrity_check"}`), "run_maintenance", `{"action":"integrity_check"}`, "", ""}},
		"POST /api/app/commands/{type}":         f.everyCommand(),
	}
}

// everyCommand is POST /api/app/commands/{type} for every command type.
func (f *matrixFixture) everyCommand() []commandCase {
	v := `"expectedVersion":999`
	bodies := map[string]commandCase{
		"create_playbook":      {cmdBody: `{"name":"audit-repo","prompt":"x"}`, project: "default"},
		"update_playbook":      {cmdBody: `{"playbook":"audit-repo",` + v + `,"prompt":"y"}`, targetKind: "playbook", project: "default"},
		"delete_playbook":      {cmdBody: `{"playbook":"prod-audit",` + v + `}`, targetKind: "playbook", project: "prod"},
		"create_workflow":      {cmdBody: `{"name":"wf","steps":[{"playbook":"audit-repo"}]}`, project: "default"},
		"update_workflow":      {cmdBody: `{"workflow":"wf",` + v + `,"description":"d"}`, targetKind: "workflow", project: "default"},
		"delete_workflow":      {cmdBody: `{"workflow":"wf",` + v + `}`, targetKind: "workflow", project: "default"},
		"launch_playbook":      {cmdBody: `{"playbook":"audit-repo","input":"x","args":{"repo":"x"}}`, targetKind: "playbook", project: "default"},
		"launch_workflow":      {cmdBody: `{"workflow":"wf",` + v + `}`, targetKind: "workflow", project: "default"},
		"cancel_run":           {cmdBody: `{"run":"` + f.runID + `"}`, targetKind: "run", project: "default"},
		"retry_run":            {cmdBody: `{"run":"` + f.runID + `"}`, targetKind: "run", project: "default"},
		"create_schedule":      {cmdBody: `{"name":"prod-nightly","cron":"0 3 * * *","playbook":"prod-audit"}`, project: "prod"},
		"update_schedule":      {cmdBody: `{"schedule":"prod-nightly",` + v + `,"cron":"0 4 * * *"}`, targetKind: "schedule", project: "prod"},
		"set_schedule_enabled": {cmdBody: `{"schedule":"prod-nightly","enabled":true,` + v + `}`, targetKind: "schedule", project: "prod"},
		"delete_schedule":      {cmdBody: `{"schedule":"prod-nightly",` + v + `}`, targetKind: "schedule", project: "prod"},
		"run_maintenance":      {cmdBody: `{"action":"checkpoint"}`},
		// Not indeterminate: decided on what it says of itself, then 409.
		"reconcile_proposal": {cmdBody: `{"proposal":"` + f.team[0].prop.ID + `","outcome":"failed"}`},
	}
	var out []commandCase
	for _, cs := range studio.Commands() {
		c, ok := bodies[cs.Type]
		if !ok {
			c = commandCase{cmdBody: "missing"} // fails below: a command without a case
		}
		c.path, c.method, c.cmdType = "/api/app/commands/"+cs.Type, "POST", cs.Type
		c.body = jsonBody(c.cmdBody)
		out = append(out, c)
	}
	return out
}

func jsonBody(s string) any { return jsontext.Value(s) }

// commandResource is a direct command as policies see it.
func commandResource(t *testing.T, c commandCase, author string) policy.Proposal {
	cmd, err := studio.DecodeCommand(c.cmdType, jsontext.Value(c.cmdBody))
	if err != nil {
		t.Errorf("the matrix's %s case: %v", c.cmdType, err)
		return policy.Proposal{}
	}
	sp := studio.SpecOf(cmd)
	return policy.Proposal{ID: c.cmdType, CommandType: c.cmdType, Risk: sp.Risk, Impact: string(studio.ImpactOf(cmd)),
		TargetKind: c.targetKind, Project: c.project, Author: author}
}

// httpCases are a route's cases for p; nil when the matrix does not know
// the route.
func (f *matrixFixture) httpCases(t *testing.T, p *matrixPrincipal, pattern string) []matrixCase {
	route := httpapi.RouteActions[pattern]
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		if pattern != "/api/" {
			return []matrixCase{} // "/": the degraded API's, not served here
		}
		method, path = http.MethodGet, "/api/no-such-endpoint"
	}
	mk := func(name string, steps []step, run func(t *testing.T) verdict) matrixCase {
		return matrixCase{door: "http", name: name, who: p, steps: steps, run: run}
	}
	var out []matrixCase
	switch route.On {
	case httpapi.OnStudio:
		vals := map[string]string{"ref": "audit-repo", "id": f.runID}
		var body any
		switch {
		case strings.HasPrefix(path, "/api/admin/principals/"):
			vals["ref"] = "no-such-principal"
		case strings.HasPrefix(path, "/api/app/workflows/"):
			vals["ref"] = "wf"
		case strings.HasPrefix(path, "/api/app/schedules/"):
			vals["ref"] = "prod-nightly"
		case strings.HasPrefix(path, "/api/admin/"):
			vals["id"] = "no-such-id"
		}
		if method == http.MethodPost || method == http.MethodPatch {
			body = bogus
		}
		switch pattern {
		case "GET /api/app/events":
			path += "?after=-1" // refused once decided, before it streams
		case "POST /mcp":
			return []matrixCase{mk(pattern, []step{{route.Action, policy.Studio{}, false}}, func(t *testing.T) verdict {
				status, b := f.mcpPost(t, p.token, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, "tools/list", "", false)
				return classify(status, b, nil)
			})}
		case "POST /api/admin/policy/explain":
			body = map[string]any{"principal": "q", "action": "whoami"}
		}
		path = fill(path, vals)
		out = append(out, mk(pattern, []step{{route.Action, policy.Studio{}, false}}, func(t *testing.T) verdict {
			return f.call(t, p.token, method, path, body)
		}))
	case httpapi.OnConversation:
		for variant, convs := range f.variants(p) {
			for _, cf := range convs {
				vals := map[string]string{"id": cf.conv.ID, "rid": cf.requestID, "eid": uuid.NewString()}
				steps := []step{{policy.ReadConversation, cf.conv, true}, {route.Action, cf.conv, false}}
				var body any
				if method == http.MethodPost || method == http.MethodPatch {
					body = bogus
				}
				if strings.HasSuffix(pattern, "/cancel") && cf.prop.Author != p.Name {
					// Closing another's pending proposal is denying it.
					steps = append(steps, step{policy.Deny, cf.prop, false})
				}
				u := fill(path, vals)
				name := pattern + " on " + variant + " " + cf.prop.CommandType
				out = append(out, mk(name, steps, func(t *testing.T) verdict { return f.call(t, p.token, method, u, body, cf.conv.ID) }))
				if pattern == "PATCH /api/operator/conversations/{id}" {
					vis := map[string]any{"visibility": cf.conv.Visibility} // unchanged: allowed changes nothing
					out = append(out, mk(name+" (visibility)", append(slices.Clone(steps), step{policy.SetVisibility, cf.conv, false}),
						func(t *testing.T) verdict { return f.call(t, p.token, method, u, vis, cf.conv.ID) }))
				}
			}
		}
	case httpapi.OnProposal:
		for variant, convs := range f.variants(p) {
			for _, cf := range convs {
				steps := []step{{policy.ReadProposal, cf.prop, true}, {route.Action, cf.prop, false}}
				if strings.Contains(path, "{id}") {
					steps = append([]step{{policy.ReadConversation, cf.conv, true}}, steps...)
				}
				var body any
				if method == http.MethodPost {
					body = bogus
				}
				u := fill(path, map[string]string{"id": cf.conv.ID, "pid": cf.prop.ID})
				out = append(out, mk(pattern+" on "+variant+" "+cf.prop.CommandType, steps,
					func(t *testing.T) verdict { return f.call(t, p.token, method, u, body, cf.conv.ID, cf.prop.ID) }))
			}
		}
	case httpapi.OnCommand:
		cases, ok := f.commandCases()[pattern]
		if !ok {
			return nil
		}
		for _, c := range cases {
			res := commandResource(t, c, p.Name)
			out = append(out, mk(pattern+" "+c.cmdType, []step{{policy.RunCommand, res, false}},
				func(t *testing.T) verdict { return f.call(t, p.token, c.method, c.path, c.body) }))
		}
	case httpapi.OnTicket:
		return []matrixCase{} // ticketCases
	case httpapi.OnThread:
		return f.aguiCases(p)
	default:
		return nil
	}
	return out
}

// ticketCases mint a ticket for each conversation and redeem it.
func (f *matrixFixture) ticketCases(p *matrixPrincipal) []matrixCase {
	var out []matrixCase
	for variant, convs := range f.variants(p) {
		cf := convs[0]
		mint := []step{{policy.ReadConversation, cf.conv, true}, {policy.MintTicket, cf.conv, false}}
		redeem := append(slices.Clone(mint), step{policy.RedeemTicket, cf.conv, false})
		out = append(out, matrixCase{door: "ticket", name: "mint and redeem on " + variant, who: p, steps: redeem, run: func(t *testing.T) verdict {
			c := apiclient.New(f.d.URL, p.token, nil)
			tk, err := c.CreateTicket(testCtx(t), protocol.StreamTicketRequest{ConversationID: cf.conv.ID})
			if err != nil {
				b, _ := json.Marshal(protocol.ErrorBody{Error: protocol.ErrorOf(err)})
				return classify(protocol.ErrorOf(err).Code.HTTPStatus(), b, []string{cf.conv.ID})
			}
			return f.call(t, "", http.MethodGet, "/api/operator/conversations/"+cf.conv.ID+"/stream?after_sequence=0&ticket="+url.QueryEscape(tk.Ticket), nil, cf.conv.ID)
		}})
	}
	return out
}

// mcpPost posts one JSON-RPC message to /mcp: as a client of the newest
// revision (its headers), or of one with batches (none).
func (f *matrixFixture) mcpPost(t *testing.T, token, body, method, name string, current bool) (int, []byte) {
	t.Helper()
	c := testutil.MCPCall{URL: f.d.URL, Token: token, Body: body}
	if current {
		c.Method, c.Name = method, name
	}
	return testutil.MCPPost(t, testCtx(t), c)
}

// toolOutcome classifies a tools/call result: refused by the policy, or not.
func toolOutcome(raw json.RawMessage) verdict {
	if pe := testutil.MCPToolError(raw); pe != nil && pe.Code == protocol.Denied {
		reason, _ := pe.Details["reason"].(string)
		return verdict{kind: "denied", reason: reason}
	}
	return verdict{kind: "allowed"}
}

// mcpCases call every tool, alone and in a batch, with arguments it
// refuses once the call is allowed (nothing is proposed).
func (f *matrixFixture) mcpCases(p *matrixPrincipal) []matrixCase {
	var out []matrixCase
	for _, tl := range f.tools {
		var res policy.Resource = policy.Studio{}
		if tl.action == policy.Propose {
			cs, _ := studio.LookupCommand(tl.name)
			res = policy.ProposeResource(cs.Type, cs.Risk, string(cs.Impact), p.Name)
		}
		steps := []step{{tl.action, res, false}}
		callArgs := `{"__matrix":1}`
		if tl.action != policy.Propose && tl.name != mcpserver.GetProposalTool {
			callArgs = `{}`
		}
		call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tl.name + `","arguments":` + callArgs + `}}`
		// The newest revision says its version and the client's capabilities in _meta.
		single := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tl.name + `","arguments":` + callArgs +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + testutil.MCPVersion + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
		out = append(out,
			matrixCase{door: "mcp", name: tl.name, who: p, steps: steps, run: func(t *testing.T) verdict {
				status, b := f.mcpPost(t, p.token, single, "tools/call", tl.name, true)
				if status != http.StatusOK {
					return classify(status, b, nil)
				}
				return toolOutcome(b)
			}},
			matrixCase{door: "mcp-batch", name: tl.name, who: p, steps: steps, run: func(t *testing.T) verdict {
				status, b := f.mcpPost(t, p.token, "["+call+"]", "", "", false)
				var answers []json.RawMessage
				if status != http.StatusOK || json.Unmarshal(b, &answers) != nil || len(answers) != 1 {
					t.Errorf("batch %s as %s: %d %s", tl.name, p.Name, status, b)
					return verdict{kind: "error"}
				}
				return toolOutcome(answers[0])
			}})
	}
	return out
}

// cliCases run the binary's commands: each speaks HTTP, decided there.
func (f *matrixFixture) cliCases(t *testing.T, p *matrixPrincipal, dataDir string) []matrixCase {
	env := []string{"STUDIO_URL=" + f.d.URL, "STUDIO_TOKEN=" + p.token, "STUDIO_DATA_DIR=" + dataDir}
	cli := func(name string, steps []step, hideIDs []string, args ...string) matrixCase {
		return matrixCase{door: "cli", name: name, who: p, steps: steps, run: func(t *testing.T) verdict {
			_, stderr, code := runStudio(t, env, args...)
			switch {
			case code == exitFailure && strings.Contains(stderr, "studio: denied:"):
				return verdict{kind: "denied"}
			case code == exitPending:
				return verdict{kind: "approval"}
			case code == exitNotFound:
				for _, id := range hideIDs {
					if strings.Contains(stderr, id+" not found") {
						return verdict{kind: "hidden"}
					}
				}
			case code != exitOK && code != exitConflict && code != exitNotFound:
				t.Errorf("studio %v as %s: exit %d: %s", args, p.Name, code, stderr)
			}
			return verdict{kind: "allowed"}
		}}
	}
	var out []matrixCase
	for variant, convs := range f.variants(p) {
		cf := convs[0]
		read := step{policy.ReadConversation, cf.conv, true}
		hide := []string{cf.conv.ID}
		out = append(out,
			cli("conversations show on "+variant, []step{read}, hide, "operator", "conversations", "show", cf.conv.ID, "-o", "json"),
			cli("conversations delete on "+variant, []step{read, {policy.DeleteConversation, cf.conv, false}}, hide,
				"operator", "conversations", "delete", cf.conv.ID),
			cli("ticket on "+variant, []step{read, {policy.MintTicket, cf.conv, false}}, hide,
				"operator", "ticket", "--conversation", cf.conv.ID, "-o", "json"))
	}
	schedule := func(cmdType, body string) policy.Proposal {
		return commandResource(t, commandCase{cmdType: cmdType, cmdBody: body, targetKind: "schedule", project: "prod"}, p.Name)
	}
	out = append(out,
		cli("conversations list", []step{{policy.ListConversations, policy.Studio{}, false}}, nil, "operator", "conversations", "list", "-o", "json"),
		cli("proposals", []step{{policy.ListConversations, policy.Studio{}, false}}, nil, "operator", "proposals", "-o", "json"),
		cli("audit list", []step{{policy.ReadAudit, policy.Studio{}, false}}, nil, "audit", "list", "-o", "json"),
		cli("playbooks list", []step{{policy.ReadStudio, policy.Studio{}, false}}, nil, "playbooks", "list", "-o", "json"),
		cli("schedules delete", []step{{policy.RunCommand, schedule("delete_schedule", `{"schedule":"prod-nightly","expectedVersion":999}`), false}}, nil,
			"schedules", "delete", "prod-nightly", "--expected-version", "999"),
		// Under four-eyes nobody deletes it alone: sent for approval (exit 6).
		cli("schedules delete (for approval)", []step{{policy.RunCommand, schedule("delete_schedule", `{"schedule":"prod-nightly"}`), false}}, nil,
			"schedules", "delete", "prod-nightly"),
		cli("schedules pause", []step{{policy.RunCommand, schedule("set_schedule_enabled", `{"schedule":"prod-nightly","enabled":false}`), false}}, nil,
			"schedules", "pause", "prod-nightly"),
		cli("principals list", []step{{policy.ManagePrincipals, policy.Studio{}, false}}, nil, "principals", "list", "-o", "json"),
		cli("whoami", []step{{policy.Whoami, policy.Studio{}, false}}, nil, "whoami"),
		cli("policy explain", []step{{policy.ExplainPolicy, policy.Studio{}, false}}, nil,
			"policy", "explain", "--principal", "q", "--action", "whoami", "-o", "json"),
	)
	return out
}
