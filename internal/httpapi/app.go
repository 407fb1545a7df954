package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// The cockpit's application API (docs/design.md §5): /api/app/... over the same
// application services the operator's tools call, with no model and no dock
// involved. Every change goes through studio.Service.Execute with the manual
// trigger, so it is validated, version-checked, applied in one transaction
// and audited as "studio.app.command" by "studio_cockpit" (or "studio_cli"
// for the command line's requests).

// maxAppBody bounds application request bodies: a playbook prompt or a run
// input holds up to 32 768 characters of up to four bytes each.
const maxAppBody = 256 << 10

func (s *Server) appRoutes() {
	m, a := s.mux, s.authed
	m.HandleFunc("GET /api/app/events", a(s.handleAppEvents))
	m.HandleFunc("GET /api/app/playbooks", a(s.handleListPlaybooks))
	m.HandleFunc("POST /api/app/playbooks", a(bodyCommand[studio.CreatePlaybookCommand](s, maxAppBody, http.StatusCreated, nil, pickPlaybook)))
	m.HandleFunc("GET /api/app/playbooks/{ref}", a(s.handleGetPlaybook))
	m.HandleFunc("PATCH /api/app/playbooks/{ref}", a(bodyCommand(s, maxAppBody, http.StatusOK, func(c *studio.UpdatePlaybookCommand) (string, *string) { return "playbook", &c.Playbook }, pickPlaybook)))
	m.HandleFunc("DELETE /api/app/playbooks/{ref}", a(s.handleDeletePlaybook))
	m.HandleFunc("POST /api/app/playbooks/{ref}/launch", a(bodyCommand(s, maxAppBody, http.StatusAccepted, func(c *studio.LaunchPlaybookCommand) (string, *string) { return "playbook", &c.Playbook }, pickRun)))

	m.HandleFunc("GET /api/app/workflows", a(s.handleListWorkflows))
	m.HandleFunc("POST /api/app/workflows", a(bodyCommand[studio.CreateWorkflowCommand](s, maxAppBody, http.StatusCreated, nil, pickWorkflow)))
	m.HandleFunc("GET /api/app/workflows/{ref}", a(s.handleGetWorkflow))
	m.HandleFunc("PATCH /api/app/workflows/{ref}", a(bodyCommand(s, maxAppBody, http.StatusOK, func(c *studio.UpdateWorkflowCommand) (string, *string) { return "workflow", &c.Workflow }, pickWorkflow)))
	m.HandleFunc("DELETE /api/app/workflows/{ref}", a(s.handleDeleteWorkflow))
	m.HandleFunc("POST /api/app/workflows/{ref}/launch", a(bodyCommand(s, maxSmallBody, http.StatusAccepted, func(c *studio.LaunchWorkflowCommand) (string, *string) { return "workflow", &c.Workflow }, pickRuns)))

	m.HandleFunc("GET /api/app/runs", a(s.handleListRuns))
	m.HandleFunc("POST /api/app/runs", a(bodyCommand[studio.LaunchPlaybookCommand](s, maxAppBody, http.StatusAccepted, nil, pickRun)))
	m.HandleFunc("GET /api/app/runs/stats", a(s.handleRunStats))
	m.HandleFunc("GET /api/app/runs/activity", a(s.handleRunActivity))
	m.HandleFunc("GET /api/app/runs/{id}", a(s.handleGetRun))
	m.HandleFunc("POST /api/app/runs/{id}/cancel", a(s.handleCancelRun))
	m.HandleFunc("POST /api/app/runs/{id}/retry", a(s.handleRetryRun))

	m.HandleFunc("GET /api/app/schedules", a(s.handleListSchedules))
	m.HandleFunc("POST /api/app/schedules", a(bodyCommand[studio.CreateScheduleCommand](s, maxAppBody, http.StatusCreated, nil, pickSchedule)))
	m.HandleFunc("GET /api/app/schedules/preview", a(s.handleCronPreview))
	m.HandleFunc("GET /api/app/schedules/{ref}", a(s.handleGetSchedule))
	m.HandleFunc("PATCH /api/app/schedules/{ref}", a(bodyCommand(s, maxAppBody, http.StatusOK, func(c *studio.UpdateScheduleCommand) (string, *string) { return "schedule", &c.Schedule }, pickSchedule)))
	m.HandleFunc("DELETE /api/app/schedules/{ref}", a(s.handleDeleteSchedule))
	m.HandleFunc("POST /api/app/schedules/{ref}/enable", a(s.handleEnableSchedule(true)))
	m.HandleFunc("POST /api/app/schedules/{ref}/disable", a(s.handleEnableSchedule(false)))

	m.HandleFunc("GET /api/app/system/health", a(s.handleHealth))
	m.HandleFunc("GET /api/app/system/operator", a(s.handleOperatorActivity))
	m.HandleFunc("POST /api/app/system/maintenance", a(bodyCommand[studio.RunMaintenanceCommand](s, maxSmallBody, http.StatusOK, nil, func(res studio.Result) any { return res.Maintenance })))
	m.HandleFunc("GET /api/app/audit", a(s.handleAudit))
	m.HandleFunc("GET /api/app/audit/actors", a(s.handleAuditActors))
	m.HandleFunc("POST /api/app/commands/{type}", a(s.handleCommand))
}

// execute runs a cockpit command, once the policy allows its principal to
// run it directly (run_command), and answers status with what pick takes
// from the result. A command the policy says needs a second approver does
// not run on one principal's word: it becomes an approval request, a
// pending proposal another principal decides, answered 202 (approval).
func (s *Server) execute(w http.ResponseWriter, r *http.Request, cmd studio.Command, status int, pick func(studio.Result) any) {
	who, _ := protocol.PrincipalFrom(r.Context())
	// Decided before anything is said of the command's target: one that
	// cannot be resolved is decided on what the command says of itself.
	facts, ferr := s.cfg.App.FactsOf(r.Context(), cmd)
	if ferr != nil {
		facts = studio.FactsOfSpec(cmd)
	}
	d, err := policy.AskDecision(r.Context(), policy.RunCommand, commandResource(facts, who.Name))
	if err != nil && d.Effect != policy.EffectObligation {
		s.writeError(w, r, err)
		return
	}
	if ferr != nil {
		s.writeError(w, r, ferr)
		return
	}
	if d.Effect == policy.EffectObligation {
		s.requestApproval(w, r, cmd)
		return
	}
	res, err := s.cfg.App.Execute(r.Context(), cmd, studio.ExecOptions{Trigger: studio.TriggerManual, Actor: manualActor(r, who)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, pick(res))
}

// requestApproval answers a direct command that needs a second approver:
// 202 with its pending proposal (protocol.ApprovalRequest), the same one
// again for the same Idempotency-Key, and Location its proposal.
func (s *Server) requestApproval(w http.ResponseWriter, r *http.Request, cmd studio.Command) {
	ap, err := s.cfg.Proposals.RequestApproval(r.Context(), coordinator.ApprovalRequest{Command: cmd,
		IdempotencyKey: r.Header.Get("Idempotency-Key")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/operator/proposals/"+ap.Proposal.ID)
	writeJSON(w, http.StatusAccepted, protocol.ApprovalRequest{ProposalState: ap.Proposal, Message: protocol.ApprovalPendingMessage})
}

// commandResource is a command asked for directly, as policies see it:
// its author is the asker, and it has no conversation.
func commandResource(f studio.Facts, author string) policy.Proposal {
	return policy.Proposal{ID: f.Type, CommandType: f.Type, Risk: f.Risk, Impact: string(f.Impact), TargetKind: f.TargetKind,
		Project: f.Project, Author: author}
}

// CLIUserAgent starts the User-Agent of the studio command line's
// requests (Client.UserAgent): "studio-cli/VERSION".
const CLIUserAgent = "studio-cli/"

// manualActor is who a person's command came from, for the audit trail:
// its principal; without one (no principal store), the command line when
// its client says so, else the cockpit — a label, not an authorization.
func manualActor(r *http.Request, who protocol.Principal) string {
	if who.Name != "" {
		return who.Name // who it was: the principal, whatever client it used
	}
	if strings.HasPrefix(r.UserAgent(), CLIUserAgent) {
		return studio.ActorCLI
	}
	return studio.ActorCockpit
}

func answer[T any](w http.ResponseWriter, r *http.Request, s *Server, v T, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// bodyCommand serves a command decoded from the request body. When ref is
// set, the command names its resource by the path's {ref}: a body naming
// another one is refused. pick chooses what of the result to answer.
func bodyCommand[C studio.Command](s *Server, limit int64, status int, ref func(*C) (field string, value *string),
	pick func(studio.Result) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var cmd C
		if err := decodeBody(w, r, limit, &cmd); err != nil {
			s.writeError(w, r, err)
			return
		}
		if ref != nil {
			field, value := ref(&cmd)
			if err := samePathRef(field, *value, r.PathValue("ref")); err != nil {
				s.writeError(w, r, err)
				return
			}
			*value = r.PathValue("ref")
		}
		s.execute(w, r, cmd, status, pick)
	}
}

func pickPlaybook(res studio.Result) any { return res.Playbook }
func pickWorkflow(res studio.Result) any { return res.Workflow }
func pickRun(res studio.Result) any      { return res.Run }
func pickSchedule(res studio.Result) any { return res.Schedule }

// samePathRef refuses a body that names another resource than the path.
func samePathRef(field, inBody, inPath string) error {
	if inBody != "" && inBody != inPath {
		return protocol.Errorf(protocol.Validation, "%s in the body (%s) is not the one in the path (%s)", field, inBody, inPath).With("field", field)
	}
	return nil
}

func pageLimit(r *http.Request) (int, error) {
	n, err := queryInt(r.URL.Query().Get("limit"), studio.DefaultPageSize, 1, studio.MaxPageSize, "limit")
	return int(n), err
}

// queryTime reads Unix seconds or an RFC 3339 time.
func queryTime(v, name string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		t := protocol.Time(f)
		return &t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, protocol.Errorf(protocol.Validation, "%s must be Unix seconds or an RFC 3339 time", name).With("field", name)
	}
	return &t, nil
}

func queryBool(v, name string) (*bool, error) {
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, protocol.Errorf(protocol.Validation, "%s must be true or false", name).With("field", name)
	}
	return &b, nil
}

func expectedVersionQuery(r *http.Request) (int64, error) {
	return queryInt(r.URL.Query().Get("expectedVersion"), 0, 1, 1<<53, "expectedVersion")
}

// --- playbooks ---------------------------------------------------------------

func (s *Server) handleListPlaybooks(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	page, err := s.cfg.App.ListPlaybooks(r.Context(), studio.PlaybookQuery{Query: q.Get("q"), Project: q.Get("project"),
		Limit: limit, Cursor: q.Get("cursor")})
	answer(w, r, s, page, err)
}

func (s *Server) handleGetPlaybook(w http.ResponseWriter, r *http.Request) {
	p, err := s.cfg.App.GetPlaybook(r.Context(), r.PathValue("ref"))
	answer(w, r, s, p, err)
}

func (s *Server) handleDeletePlaybook(w http.ResponseWriter, r *http.Request) {
	v, err := expectedVersionQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.execute(w, r, studio.DeletePlaybookCommand{Playbook: r.PathValue("ref"), ExpectedVersion: v}, http.StatusOK,
		func(res studio.Result) any { return res })
}

// --- workflows ---------------------------------------------------------------

func (s *Server) handleListWorkflows(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	page, err := s.cfg.App.ListWorkflows(r.Context(), studio.WorkflowQuery{Query: q.Get("q"), Project: q.Get("project"),
		Limit: limit, Cursor: q.Get("cursor")})
	answer(w, r, s, page, err)
}

func (s *Server) handleGetWorkflow(w http.ResponseWriter, r *http.Request) {
	wf, err := s.cfg.App.GetWorkflow(r.Context(), r.PathValue("ref"))
	answer(w, r, s, wf, err)
}

// handleDeleteWorkflow serves DELETE /api/app/workflows/{ref}[?expectedVersion=N].
func (s *Server) handleDeleteWorkflow(w http.ResponseWriter, r *http.Request) {
	v, err := expectedVersionQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.execute(w, r, studio.DeleteWorkflowCommand{Workflow: r.PathValue("ref"), ExpectedVersion: v}, http.StatusOK,
		func(res studio.Result) any { return res })
}

// pickRuns answers a workflow launch: the workflow and its queued runs.
func pickRuns(res studio.Result) any {
	return studio.WorkflowLaunch{Workflow: res.Workflow, Runs: res.Runs}
}

// --- runs --------------------------------------------------------------------

func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	rq := studio.RunQuery{Status: q.Get("status"), Playbook: q.Get("playbook"), Project: q.Get("project"),
		Trigger: q.Get("trigger"), Schedule: q.Get("schedule"), Workflow: q.Get("workflow"), Query: q.Get("q"),
		Limit: limit, Cursor: q.Get("cursor")}
	counts, err := queryBool(q.Get("counts"), "counts")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rq.Counts = counts != nil && *counts
	if rq.Since, err = queryTime(q.Get("since"), "since"); err != nil {
		s.writeError(w, r, err)
		return
	}
	if rq.Until, err = queryTime(q.Get("until"), "until"); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.cfg.App.ListRuns(r.Context(), rq)
	answer(w, r, s, page, err)
}

func (s *Server) handleRunStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.App.RunStats(r.Context(), r.URL.Query().Get("window"))
	answer(w, r, s, st, err)
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.cfg.App.GetRun(r.Context(), r.PathValue("id"))
	answer(w, r, s, run, err)
}

// emptyBody accepts no body or {}: the action is in the path.
type emptyBody struct{}

func (s *Server) handleCancelRun(w http.ResponseWriter, r *http.Request) {
	if err := decodeBody(w, r, maxSmallBody, &emptyBody{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.execute(w, r, studio.CancelRunCommand{Run: r.PathValue("id")}, http.StatusOK, func(res studio.Result) any { return res.Run })
}

func (s *Server) handleRetryRun(w http.ResponseWriter, r *http.Request) {
	if err := decodeBody(w, r, maxSmallBody, &emptyBody{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.execute(w, r, studio.RetryRunCommand{Run: r.PathValue("id")}, http.StatusAccepted, func(res studio.Result) any { return res.Run })
}

// --- schedules ---------------------------------------------------------------

func (s *Server) handleListSchedules(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	enabled, err := queryBool(q.Get("enabled"), "enabled")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.cfg.App.ListSchedules(r.Context(), studio.ScheduleQuery{Enabled: enabled, Playbook: q.Get("playbook"),
		Query: q.Get("q"), Limit: limit, Cursor: q.Get("cursor")})
	answer(w, r, s, page, err)
}

func (s *Server) handleCronPreview(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	count, err := queryInt(q.Get("count"), 5, 1, studio.MaxPreview, "count")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.cfg.App.CronPreview(q.Get("cron"), int(count))
	answer(w, r, s, p, err)
}

func (s *Server) handleGetSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.cfg.App.GetSchedule(r.Context(), r.PathValue("ref"))
	answer(w, r, s, sc, err)
}

func (s *Server) handleDeleteSchedule(w http.ResponseWriter, r *http.Request) {
	v, err := expectedVersionQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.execute(w, r, studio.DeleteScheduleCommand{Schedule: r.PathValue("ref"), ExpectedVersion: v}, http.StatusOK,
		func(res studio.Result) any { return res })
}

// enableBody is the optional body of enable and disable.
type enableBody struct {
	ExpectedVersion int64 `json:"expectedVersion,omitzero"`
}

func (s *Server) handleEnableSchedule(enabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body enableBody
		if err := decodeBody(w, r, maxSmallBody, &body); err != nil {
			s.writeError(w, r, err)
			return
		}
		cmd := studio.SetScheduleEnabledCommand{Schedule: r.PathValue("ref"), Enabled: &enabled, ExpectedVersion: body.ExpectedVersion}
		s.execute(w, r, cmd, http.StatusOK, func(res studio.Result) any { return res.Schedule })
	}
}

// --- system, audit, commands -------------------------------------------------

// handleHealth serves the doctor's report; ?part=work only its count of
// the work in flight (what the cockpit's System view reads again on every
// change, without a quick check of the database or a call to the model).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	var rep studio.DoctorReport
	var err error
	switch part := r.URL.Query().Get("part"); part {
	case "":
		rep, err = s.cfg.App.Doctor(r.Context())
	case "work":
		rep, err = s.cfg.App.DoctorWork(r.Context())
	default:
		err = protocol.Errorf(protocol.Validation, "part must be work (or absent: the whole report)").With("field", "part")
	}
	answer(w, r, s, rep, err)
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	aq := studio.AuditQuery{Action: q.Get("action"), TargetID: q.Get("targetId"), Actor: q.Get("actor"),
		CommandType: q.Get("commandType"), Target: q.Get("target"), Limit: limit, Cursor: q.Get("cursor")}
	if aq.Since, err = queryTime(q.Get("since"), "since"); err != nil {
		s.writeError(w, r, err)
		return
	}
	if aq.Until, err = queryTime(q.Get("until"), "until"); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.cfg.App.ListAudit(r.Context(), aq)
	answer(w, r, s, page, err)
}

// handleAuditActors serves GET /api/app/audit/actors: who the audit trail
// can be filtered by.
func (s *Server) handleAuditActors(w http.ResponseWriter, r *http.Request) {
	actors, err := s.cfg.App.AuditActors(r.Context())
	if actors == nil {
		actors = []string{}
	}
	answer(w, r, s, map[string]any{"actors": actors}, err)
}

// handleCommand executes any command type by id; the body is the command.
// It answers the full result.
func (s *Server) handleCommand(w http.ResponseWriter, r *http.Request) {
	var raw jsontext.Value
	if err := decodeBody(w, r, maxAppBody, &raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd, err := studio.DecodeCommand(r.PathValue("type"), raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.execute(w, r, cmd, http.StatusOK, func(res studio.Result) any { return res })
}
