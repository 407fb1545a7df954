package studio_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
)

// world is a store with one of everything the commands act on.
type world struct {
	*fx
	audit   studio.Playbook // audit-repo: repo (required), focus (default)
	notes   studio.Playbook // unused by anything
	nightly studio.Schedule
	release studio.Workflow
	failed  studio.Run
	queued  studio.Run
	conv    store.Conversation // a finished turn: frames 1..3
	busy    store.Conversation // a turn running
	stuck   store.Proposal     // of busy's turn: executing, its outcome unknown
	open    store.Proposal     // of busy's turn: pending
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{fx: newFx(t, fxOpts{})}
	w.audit = *w.exec(studio.CreatePlaybookCommand{Name: "audit-repo", Prompt: "Audit {{repo}} for {{focus}}.\n{{input}}",
		Args: []studio.PlaybookArg{{Name: "repo", Required: true}, {Name: "focus", Default: ptr("security")}}}).Playbook
	w.notes = *w.exec(studio.CreatePlaybookCommand{Name: "notes", Description: "release notes", Prompt: "Write notes."}).Playbook
	w.nightly = *w.exec(studio.CreateScheduleCommand{Name: "nightly", Cron: "0 2 * * *", Playbook: "audit-repo",
		Args: map[string]string{"repo": "main"}}).Schedule
	w.release = *w.exec(studio.CreateWorkflowCommand{Name: "release", Steps: []studio.WorkflowStepInput{{Playbook: "audit-repo", Args: map[string]string{"repo": "main"}}}}).Workflow
	w.exec(studio.CreateWorkflowCommand{Name: "ship-it", Steps: []studio.WorkflowStepInput{
		{Playbook: "audit-repo", Args: map[string]string{"repo": "x"}}, {Playbook: "audit-repo", Input: "v2", Args: map[string]string{"repo": "y"}}}})

	first := w.exec(studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "x"}}).Run
	if _, ok, err := w.st.ClaimRun(w.ctx, store.ClaimRunParams{Now: w.clock.Now()}); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := w.st.FinishRun(w.ctx, store.FinishRunParams{ID: first.ID, Status: store.RunFailed,
		ErrorCode: ptr("model_failure"), ErrorMessage: ptr("boom"), Now: w.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	var err error
	if w.failed, err = w.svc.GetRun(w.ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	w.queued = *w.exec(studio.LaunchPlaybookCommand{Playbook: "notes"}).Run

	w.conv = w.conversation(true)
	w.busy = w.conversation(false)
	w.stuck = w.proposal(true)
	w.open = w.proposal(false)
	return w
}

// proposal stores a proposal in busy's turn, confirmed (executing) or pending.
func (w *world) proposal(confirm bool) store.Proposal {
	w.t.Helper()
	now := w.clock.Now()
	p := store.Proposal{ID: uuid.NewString(), ConversationID: w.busy.ID, RequestID: *w.busy.ActiveRequestID, CallID: "call_1",
		CommandType: "launch_playbook", Command: []byte(`{"playbook":"audit-repo"}`), CommandHash: "h", Risk: protocol.RiskExecute,
		Summary: "Launch", IdempotencyKey: uuid.NewString(), ExpiresAt: now.Add(10 * time.Minute)}
	p, err := w.st.CreateProposal(w.ctx, store.CreateProposalParams{Proposal: p, Now: now})
	if err != nil {
		w.t.Fatal(err)
	}
	if confirm {
		if p, err = w.st.ConfirmProposal(w.ctx, store.ConfirmProposalParams{ID: p.ID, Now: now,
			Audit: store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, Now: now}}); err != nil {
			w.t.Fatal(err)
		}
	}
	return p
}

// conversation creates a conversation with one turn (user frame, a text
// frame, and done when finished).
func (w *world) conversation(finish bool) store.Conversation {
	w.t.Helper()
	id, rid := uuid.NewString(), uuid.NewString()
	now := w.clock.Now()
	if _, err := w.st.CreateConversation(w.ctx, store.CreateConversationParams{ID: id, Now: now}); err != nil {
		w.t.Fatal(err)
	}
	if _, _, err := w.st.SubmitTurn(w.ctx, store.SubmitTurnParams{ConversationID: id, RequestID: rid, Instruction: "hi",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: now}); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.st.StartTurn(w.ctx, store.StartTurnParams{RequestID: rid, Now: now}); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.st.AppendFrames(w.ctx, store.AppendFramesParams{ConversationID: id, RequestID: rid, Now: now,
		Frames: []store.NewFrame{{Payload: protocol.TextPayload{Content: "hello", Format: "plain", Role: protocol.RoleAssistant}}}}); err != nil {
		w.t.Fatal(err)
	}
	if finish {
		if _, _, err := w.st.FinishTurn(w.ctx, store.FinishTurnParams{RequestID: rid, Status: store.TurnCompleted, Now: now}); err != nil {
			w.t.Fatal(err)
		}
	}
	c, err := w.st.GetConversation(w.ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// snapshot is every application resource and the conversations' frames, as
// JSON: equal snapshots mean nothing changed.
func (w *world) snapshot() string {
	w.t.Helper()
	var parts []any
	pbs, err := w.svc.ListPlaybooks(w.ctx, studio.PlaybookQuery{Limit: 200})
	check(w.t, err)
	wfs, err := w.svc.ListWorkflows(w.ctx, studio.WorkflowQuery{Limit: 200})
	check(w.t, err)
	runs, err := w.svc.ListRuns(w.ctx, studio.RunQuery{Limit: 200})
	check(w.t, err)
	scs, err := w.svc.ListSchedules(w.ctx, studio.ScheduleQuery{Limit: 200})
	check(w.t, err)
	parts = append(parts, pbs, wfs, runs, scs)
	for _, id := range []string{w.conv.ID, w.busy.ID} {
		c, err := w.st.GetConversation(w.ctx, id)
		check(w.t, err)
		frames, err := w.st.ListFrames(w.ctx, store.ListFramesParams{ConversationID: id})
		check(w.t, err)
		parts = append(parts, c.RetainedFrom, len(frames))
	}
	b, err := protocol.Marshal(parts)
	check(w.t, err)
	return string(b)
}

func (w *world) auditRows() int {
	w.t.Helper()
	page, err := w.svc.ListAudit(w.ctx, studio.AuditQuery{Action: studio.ActionCommand, Limit: 200})
	check(w.t, err)
	return len(page.Events)
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// commandCase drives one command type through success, validation,
// not_found, conflict and atomicity.
type commandCase struct {
	ok      func(w *world) studio.Command
	checkOK func(t *testing.T, w *world, res studio.Result)
	invalid func(w *world) studio.Command
	// missing names something that does not exist: not_found.
	missing func(w *world) studio.Command
	// conflict is refused with conflict; versioned reports whether its
	// details carry expectedVersion and actualVersion.
	conflict  func(w *world) (studio.Command, studio.ExecOptions)
	versioned bool
}

func target(kind, id, version string) *protocol.ResourceVersion {
	return &protocol.ResourceVersion{Kind: kind, ID: id, Version: version}
}

var commandCases = map[string]commandCase{
	"create_playbook": {
		ok: func(w *world) studio.Command {
			return studio.CreatePlaybookCommand{Name: "triage", Prompt: "Triage {{input}}", Args: []studio.PlaybookArg{{Name: "severity"}}}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if res.Playbook == nil || res.Playbook.Name != "triage" || res.Playbook.Version != 1 || res.Playbook.Project != "default" ||
				len(res.Playbook.Args) != 1 || res.Target.Kind != "playbook" || res.Target.Version != "1" {
				t.Fatalf("result = %+v", res)
			}
		},
		invalid: func(*world) studio.Command { return studio.CreatePlaybookCommand{Name: "Not A Name", Prompt: "p"} },
		missing: nil, // refers to nothing
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.CreatePlaybookCommand{Name: "audit-repo", Prompt: "p"}, studio.ExecOptions{}
		},
	},
	"update_playbook": {
		ok: func(w *world) studio.Command {
			return studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: 1, Description: ptr("audits")}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if res.Playbook.Version != 2 || res.Playbook.Description != "audits" || res.Playbook.Prompt != w.audit.Prompt || res.Target.Version != "2" {
				t.Fatalf("result = %+v", res.Playbook)
			}
		},
		invalid: func(*world) studio.Command {
			return studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: 1}
		},
		missing: func(*world) studio.Command {
			return studio.UpdatePlaybookCommand{Playbook: "nope", ExpectedVersion: 1, Prompt: ptr("x")}
		},
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: 2, Prompt: ptr("x")}, studio.ExecOptions{}
		},
		versioned: true,
	},
	"delete_playbook": {
		ok: func(w *world) studio.Command { return studio.DeletePlaybookCommand{Playbook: w.notes.ID} },
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if !res.Deleted || res.Playbook.Name != "notes" {
				t.Fatalf("result = %+v", res)
			}
			if _, err := w.svc.GetPlaybook(w.ctx, "notes"); !protocol.IsCode(err, protocol.NotFound) {
				t.Fatalf("deleted playbook still there: %v", err)
			}
		},
		invalid: func(*world) studio.Command { return studio.DeletePlaybookCommand{Playbook: " "} },
		missing: func(*world) studio.Command { return studio.DeletePlaybookCommand{Playbook: uuid.NewString()} },
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.DeletePlaybookCommand{Playbook: "notes", ExpectedVersion: 3}, studio.ExecOptions{}
		},
		versioned: true,
	},
	"create_workflow": {
		ok: func(w *world) studio.Command {
			return studio.CreateWorkflowCommand{Name: "ship", Steps: []studio.WorkflowStepInput{{Playbook: "audit-repo", Args: map[string]string{"repo": "r"}}, {Playbook: w.notes.ID}}}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			st := res.Workflow.Steps
			if len(st) != 2 || st[0].PlaybookName != "audit-repo" || st[0].Args["repo"] != "r" || st[0].Args["focus"] != "security" || st[1].PlaybookName != "notes" {
				t.Fatalf("workflow = %+v", res.Workflow)
			}
		},
		invalid: func(*world) studio.Command { return studio.CreateWorkflowCommand{Name: "empty"} },
		missing: func(*world) studio.Command {
			return studio.CreateWorkflowCommand{Name: "ghost", Steps: []studio.WorkflowStepInput{{Playbook: "no-such"}}}
		},
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.CreateWorkflowCommand{Name: "release", Steps: []studio.WorkflowStepInput{{Playbook: "notes"}}}, studio.ExecOptions{}
		},
	},
	"update_workflow": {
		ok: func(w *world) studio.Command {
			return studio.UpdateWorkflowCommand{Workflow: "release", ExpectedVersion: 1, Steps: &[]studio.WorkflowStepInput{{Playbook: "notes"}, {Playbook: "audit-repo", Args: map[string]string{"repo": "main"}}}}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if res.Workflow.Version != 2 || len(res.Workflow.Steps) != 2 || res.Workflow.Steps[0].PlaybookName != "notes" {
				t.Fatalf("workflow = %+v", res.Workflow)
			}
		},
		invalid: func(*world) studio.Command {
			return studio.UpdateWorkflowCommand{Workflow: "release", ExpectedVersion: 1}
		},
		missing: func(*world) studio.Command {
			return studio.UpdateWorkflowCommand{Workflow: "nope", ExpectedVersion: 1, Description: ptr("d")}
		},
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.UpdateWorkflowCommand{Workflow: "release", ExpectedVersion: 1, Description: ptr("d")},
				studio.ExecOptions{ExpectedTarget: target("workflow", w.release.ID, "4")}
		},
		versioned: true,
	},
	"launch_playbook": {
		ok: func(*world) studio.Command {
			return studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "repo x", Args: map[string]string{"repo": "x"}}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			r := res.Run
			if r.Status != "queued" || r.Trigger != "manual" || r.PlaybookID != w.audit.ID || r.Input != "repo x" ||
				r.Args["repo"] != "x" || r.Args["focus"] != "security" || res.Target.Kind != "run" {
				t.Fatalf("run = %+v", r)
			}
		},
		invalid: func(*world) studio.Command { return studio.LaunchPlaybookCommand{} },
		missing: func(*world) studio.Command { return studio.LaunchPlaybookCommand{Playbook: "no-such-playbook"} },
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "x"}},
				studio.ExecOptions{ExpectedTarget: target("playbook", w.audit.ID, "7")}
		},
		versioned: true,
	},
	"cancel_run": {
		ok: func(w *world) studio.Command { return studio.CancelRunCommand{Run: w.queued.ID} },
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if res.Run.Status != "cancelled" || res.Run.Error == nil || res.Run.Error.Code != "cancelled" {
				t.Fatalf("run = %+v", res.Run)
			}
		},
		invalid: func(*world) studio.Command { return studio.CancelRunCommand{Run: "last one"} },
		missing: func(*world) studio.Command { return studio.CancelRunCommand{Run: uuid.NewString()} },
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.CancelRunCommand{Run: w.queued.ID}, studio.ExecOptions{ExpectedTarget: target("run", w.queued.ID, "2")}
		},
		versioned: true,
	},
	"retry_run": {
		ok: func(w *world) studio.Command { return studio.RetryRunCommand{Run: w.failed.ID} },
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			r := res.Run
			if r.Status != "queued" || r.RetryOf == nil || *r.RetryOf != w.failed.ID || r.Args["repo"] != "x" || r.ID == w.failed.ID {
				t.Fatalf("retry = %+v", r)
			}
		},
		invalid: func(*world) studio.Command { return studio.RetryRunCommand{} },
		missing: func(*world) studio.Command { return studio.RetryRunCommand{Run: uuid.NewString()} },
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.RetryRunCommand{Run: w.failed.ID}, studio.ExecOptions{ExpectedTarget: target("run", w.failed.ID, "1")}
		},
		versioned: true,
	},
	"create_schedule": {
		ok: func(*world) studio.Command {
			return studio.CreateScheduleCommand{Name: "hourly", Cron: "0  *  * * *", Playbook: "audit-repo", Args: map[string]string{"repo": "main"}}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			sc := res.Schedule
			// The fake clock is at 12:00:xx on 9 July 2026: the next slot is 13:00.
			want := protocol.Timestamp(storetest.Epoch.Add(3600e9))
			if !sc.Enabled || sc.Cron != "0 * * * *" || sc.NextRunAt == nil || *sc.NextRunAt != want || sc.PlaybookName != "audit-repo" {
				t.Fatalf("schedule = %+v", sc)
			}
		},
		invalid: func(*world) studio.Command {
			return studio.CreateScheduleCommand{Name: "bad", Cron: "every hour", Playbook: "audit-repo"}
		},
		missing: func(*world) studio.Command {
			return studio.CreateScheduleCommand{Name: "orphan", Cron: "0 * * * *", Playbook: "no-such"}
		},
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.CreateScheduleCommand{Name: "nightly", Cron: "0 * * * *", Playbook: "notes"}, studio.ExecOptions{}
		},
	},
	"update_schedule": {
		ok: func(*world) studio.Command {
			return studio.UpdateScheduleCommand{Schedule: "nightly", ExpectedVersion: 1, Cron: ptr("30 3 * * *")}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			want := protocol.Timestamp(storetest.Epoch.Add(15*3600e9 + 30*60e9)) // next day 03:30
			if res.Schedule.Cron != "30 3 * * *" || res.Schedule.Version != 2 || *res.Schedule.NextRunAt != want {
				t.Fatalf("schedule = %+v", res.Schedule)
			}
		},
		invalid: func(*world) studio.Command {
			return studio.UpdateScheduleCommand{Schedule: "nightly", ExpectedVersion: 1, Cron: ptr("61 * * * *")}
		},
		missing: func(*world) studio.Command {
			return studio.UpdateScheduleCommand{Schedule: "nope", ExpectedVersion: 1, Input: ptr("x")}
		},
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.UpdateScheduleCommand{Schedule: "nightly", ExpectedVersion: 2, Input: ptr("x")}, studio.ExecOptions{}
		},
		versioned: true,
	},
	"set_schedule_enabled": {
		ok: func(*world) studio.Command {
			return studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(false)}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if res.Schedule.Enabled || res.Schedule.NextRunAt != nil || res.Schedule.Version != 2 {
				t.Fatalf("schedule = %+v", res.Schedule)
			}
		},
		invalid: func(*world) studio.Command { return studio.SetScheduleEnabledCommand{Schedule: "nightly"} },
		missing: func(*world) studio.Command {
			return studio.SetScheduleEnabledCommand{Schedule: "nope", Enabled: ptr(true)}
		},
		conflict: func(*world) (studio.Command, studio.ExecOptions) {
			return studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(false), ExpectedVersion: 9}, studio.ExecOptions{}
		},
		versioned: true,
	},
	"delete_schedule": {
		ok: func(w *world) studio.Command {
			return studio.DeleteScheduleCommand{Schedule: "nightly", ExpectedVersion: 1}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if !res.Deleted || res.Schedule.ID != w.nightly.ID {
				t.Fatalf("result = %+v", res)
			}
		},
		invalid: func(*world) studio.Command {
			return studio.DeleteScheduleCommand{Schedule: "nightly", ExpectedVersion: -1}
		},
		missing: func(*world) studio.Command { return studio.DeleteScheduleCommand{Schedule: uuid.NewString()} },
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.DeleteScheduleCommand{Schedule: "nightly"}, studio.ExecOptions{ExpectedTarget: target("schedule", w.nightly.ID, "0")}
		},
		versioned: true,
	},
	"launch_workflow": {
		ok: func(w *world) studio.Command {
			// release's one step lacks audit-repo's required repo: refused (TestLaunchWorkflowBindsArgs).
			return studio.LaunchWorkflowCommand{Workflow: "ship-it", ExpectedVersion: 1}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if len(res.Runs) != 2 || res.Runs[0].PlaybookName != "audit-repo" || res.Runs[0].Args["repo"] != "x" || res.Runs[0].WorkflowID == nil ||
				*res.Runs[0].WorkflowID != res.Workflow.ID || *res.Runs[0].WorkflowStep != 0 || *res.Runs[1].WorkflowStep != 1 ||
				res.Runs[1].Input != "v2" || res.Target.Version != "1" {
				t.Fatalf("result = %+v", res)
			}
		},
		invalid: func(*world) studio.Command { return studio.LaunchWorkflowCommand{} },
		missing: func(*world) studio.Command { return studio.LaunchWorkflowCommand{Workflow: "nope"} },
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.LaunchWorkflowCommand{Workflow: "release", ExpectedVersion: 2}, studio.ExecOptions{}
		},
		versioned: true,
	},
	"delete_workflow": {
		ok: func(w *world) studio.Command {
			return studio.DeleteWorkflowCommand{Workflow: "release", ExpectedVersion: 1}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			if !res.Deleted || res.Workflow.ID != w.release.ID {
				t.Fatalf("result = %+v", res)
			}
		},
		invalid: func(*world) studio.Command {
			return studio.DeleteWorkflowCommand{Workflow: "release", ExpectedVersion: -1}
		},
		missing: func(*world) studio.Command { return studio.DeleteWorkflowCommand{Workflow: uuid.NewString()} },
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.DeleteWorkflowCommand{Workflow: "release"}, studio.ExecOptions{ExpectedTarget: target("workflow", w.release.ID, "0")}
		},
		versioned: true,
	},
	"run_maintenance": {
		ok: func(w *world) studio.Command {
			return studio.RunMaintenanceCommand{Action: "purge_frames", ConversationID: w.conv.ID, BeforeSequence: 3}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			m := res.Maintenance
			if !m.OK || *m.FramesPurged != 2 || *m.RetainedFromSequence != 3 || *m.EarliestAfterSequence != 2 {
				t.Fatalf("maintenance = %+v", m)
			}
		},
		invalid: func(*world) studio.Command { return studio.RunMaintenanceCommand{Action: "defragment"} },
		missing: func(*world) studio.Command {
			return studio.RunMaintenanceCommand{Action: "purge_frames", ConversationID: uuid.NewString(), BeforeSequence: 1}
		},
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.RunMaintenanceCommand{Action: "purge_frames", ConversationID: w.busy.ID, BeforeSequence: 2}, studio.ExecOptions{}
		},
	},
}

func init() {
	commandCases["reconcile_proposal"] = commandCase{
		ok: func(w *world) studio.Command {
			return studio.ReconcileProposalCommand{Proposal: w.stuck.ID, Outcome: "succeeded", Note: "the run exists"}
		},
		checkOK: func(t *testing.T, w *world, res studio.Result) {
			p, err := w.st.GetProposal(w.ctx, w.stuck.ID)
			if err != nil || p.Status != store.ProposalSucceeded || res.Reconciled == nil || res.Reconciled.Outcome != "succeeded" {
				t.Fatalf("reconciled %+v %v; result %+v", p.Status, err, res)
			}
			rows, err := w.st.ListAdminEvents(w.ctx, store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: w.stuck.ID, Limit: 1})
			if err != nil || len(rows) != 1 || !strings.Contains(string(rows[0].Details), `"decision":"executed"`) {
				t.Fatalf("audit %+v %v", rows, err)
			}
		},
		invalid: func(w *world) studio.Command {
			return studio.ReconcileProposalCommand{Proposal: w.stuck.ID, Outcome: "maybe"}
		},
		missing: func(*world) studio.Command {
			return studio.ReconcileProposalCommand{Proposal: uuid.NewString(), Outcome: "failed"}
		},
		conflict: func(w *world) (studio.Command, studio.ExecOptions) {
			return studio.ReconcileProposalCommand{Proposal: w.open.ID, Outcome: "failed"}, studio.ExecOptions{}
		},
	}
}

func TestEveryCommandHasACase(t *testing.T) {
	t.Parallel()
	for _, typ := range studio.CommandTypes() {
		if _, ok := commandCases[typ]; !ok {
			t.Errorf("command %s has no test case", typ)
		}
	}
	if len(studio.CommandTypes()) != 16 {
		t.Fatalf("command types = %v, want the ADR's 13 application commands, reconcile_proposal, launch_workflow and delete_workflow", studio.CommandTypes())
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	for typ, tc := range commandCases {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			t.Run("success", func(t *testing.T) {
				t.Parallel()
				w := newWorld(t)
				before := w.auditRows()
				cmd := tc.ok(w)
				if studio.TypeOf(cmd) != typ {
					t.Fatalf("case %s builds a %s", typ, studio.TypeOf(cmd))
				}
				res, err := w.svc.Execute(w.ctx, cmd, studio.ExecOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.CommandType != typ || res.Summary != cmd.Summary() || res.Summary == "" {
					t.Fatalf("result header = %q %q", res.CommandType, res.Summary)
				}
				tc.checkOK(t, w, res)
				// Every change leaves one audit row naming the command.
				if after := w.auditRows(); after != before+1 {
					t.Fatalf("audit rows %d -> %d, want one more", before, after)
				}
				page, err := w.svc.ListAudit(w.ctx, studio.AuditQuery{Limit: 1, Action: studio.ActionCommand})
				check(t, err)
				ev := page.Events[0]
				if ev.Actor != studio.ActorCockpit || !bytes.Contains(ev.Details, []byte(`"command_type":"`+typ+`"`)) {
					t.Fatalf("audit row = %+v %s", ev, ev.Details)
				}
				// A command that creates runs names them: a run finds the row that launched it.
				var created []string
				if res.Run != nil && typ != "cancel_run" {
					created = append(created, res.Run.ID)
				}
				for _, r := range res.Runs {
					created = append(created, r.ID)
				}
				for _, id := range created {
					if !bytes.Contains(ev.Details, []byte(`"run_ids":[`)) || !bytes.Contains(ev.Details, []byte(`"`+id+`"`)) {
						t.Fatalf("the audit row of %s names no run %s: %s", typ, id, ev.Details)
					}
				}
			})
			t.Run("validation", func(t *testing.T) {
				t.Parallel()
				w := newWorld(t)
				before := w.snapshot()
				_, err := w.svc.Execute(w.ctx, tc.invalid(w), studio.ExecOptions{})
				wantCode(t, err, protocol.Validation)
				if w.snapshot() != before {
					t.Fatal("a refused command changed something")
				}
			})
			if tc.missing != nil {
				t.Run("not_found", func(t *testing.T) {
					t.Parallel()
					w := newWorld(t)
					before, rows := w.snapshot(), w.auditRows()
					_, err := w.svc.Execute(w.ctx, tc.missing(w), studio.ExecOptions{})
					wantCode(t, err, protocol.NotFound)
					if w.snapshot() != before || w.auditRows() != rows {
						t.Fatal("a refused command changed something")
					}
				})
			}
			t.Run("conflict", func(t *testing.T) {
				t.Parallel()
				w := newWorld(t)
				before, rows := w.snapshot(), w.auditRows()
				cmd, opts := tc.conflict(w)
				_, err := w.svc.Execute(w.ctx, cmd, opts)
				pe := wantCode(t, err, protocol.Conflict)
				if tc.versioned {
					if detailInt(t, pe, "expectedVersion") == detailInt(t, pe, "actualVersion") {
						t.Fatalf("version conflict details = %v", pe.Details)
					}
				}
				if w.snapshot() != before || w.auditRows() != rows {
					t.Fatal("a refused command changed something")
				}
			})
			// The change and its audit row share one transaction: when the
			// audit row cannot be written, nothing of the command stays.
			t.Run("never_half_applies", func(t *testing.T) {
				t.Parallel()
				w := newWorld(t)
				cmd := tc.ok(w)
				before := w.snapshot()
				w.breakAudit()
				_, err := w.svc.Execute(w.ctx, cmd, studio.ExecOptions{})
				if err == nil {
					t.Fatal("the command succeeded without its audit row")
				}
				if w.snapshot() != before {
					t.Fatal("the command applied although its audit row failed")
				}
			})
		})
	}
}

// TestExpectedTarget: a confirmed proposal's target must still be the one
// the command resolves to, at the same version.
func TestExpectedTarget(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cmd := studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "x"}}
	tgt, err := w.svc.ResolveTarget(w.ctx, cmd)
	if err != nil || *tgt != *target("playbook", w.audit.ID, "1") {
		t.Fatalf("ResolveTarget = %+v, %v", tgt, err)
	}
	// Matching target: runs.
	if _, err := w.svc.Execute(w.ctx, cmd, studio.ExecOptions{Trigger: studio.TriggerOperator, ExpectedTarget: tgt}); err != nil {
		t.Fatal(err)
	}
	// The playbook changes after the proposal: conflict, nothing launched.
	w.exec(studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: 1, Prompt: ptr("changed")})
	_, err = w.svc.Execute(w.ctx, cmd, studio.ExecOptions{Trigger: studio.TriggerOperator, ExpectedTarget: tgt})
	pe := wantCode(t, err, protocol.Conflict)
	if detailInt(t, pe, "expectedVersion") != 1 || detailInt(t, pe, "actualVersion") != 2 {
		t.Fatalf("details = %v", pe.Details)
	}
	// Another resource of the same name is not the confirmed target.
	_, err = w.svc.Execute(w.ctx, cmd, studio.ExecOptions{ExpectedTarget: target("playbook", uuid.NewString(), "2")})
	wantCode(t, err, protocol.Conflict)
	// A command without a target cannot match an expected one.
	_, err = w.svc.Execute(w.ctx, studio.CreatePlaybookCommand{Name: "x", Prompt: "p"}, studio.ExecOptions{ExpectedTarget: tgt})
	wantCode(t, err, protocol.Conflict)
	_, err = w.svc.Execute(w.ctx, cmd, studio.ExecOptions{ExpectedTarget: target("playbook", w.audit.ID, "two")})
	wantCode(t, err, protocol.Validation)
	// Creates and maintenance have no target.
	for _, c := range []studio.Command{studio.CreatePlaybookCommand{Name: "x", Prompt: "p"}, studio.RunMaintenanceCommand{Action: "vacuum"}} {
		if tgt, err := w.svc.ResolveTarget(w.ctx, c); err != nil || tgt != nil {
			t.Fatalf("%s target = %+v, %v", studio.TypeOf(c), tgt, err)
		}
	}
	// The operator trigger is recorded on the run and in the audit row.
	page, err := w.svc.ListRuns(w.ctx, studio.RunQuery{Trigger: "operator"})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("operator runs = %+v, %v", page, err)
	}
	ev, err := w.svc.ListAudit(w.ctx, studio.AuditQuery{Action: studio.ActionCommand, TargetID: w.audit.ID})
	check(t, err)
	if !slices.ContainsFunc(ev.Events, func(e studio.AuditEvent) bool { return e.Actor == studio.ActorOperator }) {
		t.Fatalf("no audit row by the operator: %+v", ev.Events)
	}
}

// TestLaunchArgs: undeclared and missing required arguments are refused.
func TestLaunchArgs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, args := range []map[string]string{{"repo": "x", "branch": "main"}, {"focus": "tests"}, nil} {
		_, err := w.svc.Execute(w.ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: args}, studio.ExecOptions{})
		wantCode(t, err, protocol.Validation)
	}
	res := w.exec(studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "x", "focus": "tests"}})
	if res.Run.Args["focus"] != "tests" {
		t.Fatalf("explicit argument lost: %+v", res.Run.Args)
	}
}

// TestDecodeCommand: every command type decodes strictly from JSON, and its
// canonical form decodes back to the same command.
func TestDecodeCommand(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for typ, tc := range commandCases {
		cmd := tc.ok(w)
		canon, err := studio.CanonicalCommand(cmd)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		back, err := studio.DecodeCommand(typ, canon)
		if err != nil {
			t.Fatalf("%s: decode canonical %s: %v", typ, canon, err)
		}
		again, err := studio.CanonicalCommand(back)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("%s: canonical form not stable: %s vs %s", typ, canon, again)
		}
		v := jsontext.Value(append([]byte(nil), canon...))
		if err := v.Canonicalize(); err != nil || !bytes.Equal(v, canon) {
			t.Fatalf("%s: %s is not RFC 8785 canonical", typ, canon)
		}
		// Strict: an unknown member, a duplicate name, trailing data.
		for _, bad := range []string{
			strings.Replace(string(canon), "{", `{"extra":1,`, 1),
			string(canon) + " {}",
			"[]",
		} {
			if _, err := studio.DecodeCommand(typ, []byte(bad)); !protocol.IsCode(err, protocol.Validation) {
				t.Fatalf("%s: %s decoded: %v", typ, bad, err)
			}
		}
		if spec, ok := studio.LookupCommand(typ); !ok || spec.Risk != studio.SpecOf(cmd).Risk || studio.TypeOf(spec.New()) != typ {
			t.Fatalf("%s: spec = %+v", typ, spec)
		}
	}
	_, err := studio.DecodeCommand("drop_database", []byte(`{}`))
	wantCode(t, err, protocol.Validation)
	_, err = studio.DecodeCommand("launch_playbook", []byte(`{"playbook":"a","playbook":"b"}`))
	wantCode(t, err, protocol.Validation)
	_, err = studio.DecodeCommand("set_schedule_enabled", []byte(`{"schedule":"nightly"}`))
	wantCode(t, err, protocol.Validation) // enabled is required, not false by omission
	cmd, err := studio.DecodeCommand("launch_playbook", []byte(`{"playbook":"audit-repo","input":"repo x","args":{"repo":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Summary(); got != `Launch playbook "audit-repo" with input "repo x" and args repo="x"` {
		t.Fatalf("summary = %s", got)
	}
	if got := (studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "repo x"}).Summary(); got != `Launch playbook "audit-repo" with input "repo x"` {
		t.Fatalf("summary = %s", got)
	}
	// An argument equal to the input is not quoted twice.
	if got := (studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "acme/api", Args: map[string]string{"repo": "acme/api", "depth": "2"}}).Summary(); got != `Launch playbook "audit-repo" with input "acme/api" and args depth="2" (also as repo)` {
		t.Fatalf("summary = %s", got)
	}
	h1, _ := studio.CommandHash(studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "repo x"})
	h2, _ := studio.CommandHash(&studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "repo x"})
	h3, _ := studio.CommandHash(studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: "repo y"})
	if h1 == "" || h1 != h2 || h1 == h3 {
		t.Fatalf("hashes %s %s %s", h1, h2, h3)
	}
}

// TestNamesAreNotIDs: a name that parses as a UUID would make references
// ambiguous.
func TestNamesAreNotIDs(t *testing.T) {
	t.Parallel()
	err := studio.CreatePlaybookCommand{Name: uuid.NewString(), Prompt: "p"}.Validate()
	wantCode(t, err, protocol.Validation)
}

// TestExecuteActor: a manual command may say it came from the command
// line (audited as such); no other trigger can be relabelled, and no other
// actor given.
func TestExecuteActor(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	launch := studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "x"}}
	if _, err := w.svc.Execute(w.ctx, launch, studio.ExecOptions{Actor: studio.ActorCLI}); err != nil {
		t.Fatal(err)
	}
	page, err := w.svc.ListAudit(w.ctx, studio.AuditQuery{Limit: 1, Action: studio.ActionCommand})
	check(t, err)
	if page.Events[0].Actor != studio.ActorCLI {
		t.Fatalf("actor %q, want %q", page.Events[0].Actor, studio.ActorCLI)
	}
	for _, opts := range []studio.ExecOptions{
		{Actor: studio.ActorOperator},
		{Actor: studio.ActorSystem},
		{Trigger: studio.TriggerSchedule, Actor: studio.ActorCLI},
		{Trigger: studio.TriggerOperator, Actor: studio.ActorCockpit},
	} {
		if _, err := w.svc.Execute(w.ctx, launch, opts); !protocol.IsCode(err, protocol.Validation) {
			t.Fatalf("%+v: %v, want validation", opts, err)
		}
	}
}
