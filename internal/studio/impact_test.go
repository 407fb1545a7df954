package studio_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Pausing a paused schedule is not a proposal: Prepare refuses it with a
// conflict that says it is already so (details.noChange).
func TestPrepareRefusesANoOp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.exec(studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(false)})
	_, err := w.svc.Prepare(w.ctx, studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(false)})
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["noChange"] != true || pe.Message != `schedule "nightly" is already paused; nothing to change` {
		t.Fatalf("error = %+v", pe)
	}
	_, err = w.svc.Prepare(w.ctx, studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(true)})
	if err != nil {
		t.Fatalf("enabling a paused schedule is a change: %v", err)
	}
}

// A confirmed command that became a no-op before it executed answers a
// typed NoChange result: no write, no version bump, no audit row.
func TestExecuteANoOpAnswersNoChange(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cmd := studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(false)}
	prep, err := w.svc.Prepare(w.ctx, cmd) // enabled now: a real change
	check(t, err)
	w.exec(cmd) // someone else paused it meanwhile: version 2
	before, rows := w.snapshot(), w.auditRows()
	cur := *prep.Target
	cur.Version = "2"
	res, err := w.svc.Execute(w.ctx, cmd, studio.ExecOptions{Trigger: studio.TriggerOperator, ExpectedTarget: &cur})
	check(t, err)
	if !res.NoChange || res.Message != `schedule "nightly" is already paused; nothing changed` || res.Target.Version != "2" {
		t.Fatalf("result = %+v", res)
	}
	if w.snapshot() != before || w.auditRows() != rows {
		t.Fatal("a no-op wrote something")
	}
	b, err := res.JSON()
	check(t, err)
	if want := `"noChange":true`; !strings.Contains(string(b), want) {
		t.Fatalf("result JSON %s lacks %s", b, want)
	}
}

// Impact is declared once in the command table and reaches the proposal
// with the target's human name.
func TestImpactAndTargetName(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cases := []struct {
		cmd    studio.Command
		impact studio.Impact
		name   string
	}{
		{studio.DeleteScheduleCommand{Schedule: w.nightly.ID}, studio.ImpactIrreversible, "nightly"},
		{studio.DeletePlaybookCommand{Playbook: "notes"}, studio.ImpactIrreversible, "notes"},
		{studio.CancelRunCommand{Run: w.queued.ID}, studio.ImpactDestructive, "notes run " + w.queued.ID[:8]},
		{studio.SetScheduleEnabledCommand{Schedule: "nightly", Enabled: ptr(false)}, studio.ImpactNone, "nightly"},
		{studio.RunMaintenanceCommand{Action: studio.MaintenanceVacuum}, studio.ImpactNone, ""},
		{studio.RunMaintenanceCommand{Action: studio.MaintenancePurgeDeletedConversations}, studio.ImpactIrreversible, ""},
	}
	for _, c := range cases {
		prep, err := w.svc.Prepare(w.ctx, c.cmd)
		if err != nil {
			t.Fatalf("%T: %v", c.cmd, err)
		}
		if prep.Impact != c.impact || prep.TargetName != c.name {
			t.Errorf("%s: impact %q name %q, want %q %q", prep.Type, prep.Impact, prep.TargetName, c.impact, c.name)
		}
	}
	// A run's summary names its playbook, never its full id: it is what a person confirms.
	prep, err := w.svc.Prepare(w.ctx, studio.CancelRunCommand{Run: w.queued.ID})
	if err != nil || prep.Summary != "Cancel the notes run "+w.queued.ID[:8] {
		t.Errorf("cancel summary %q (%v)", prep.Summary, err)
	}
	// A command that refers to its target by id reads as one that names it.
	for _, c := range []struct {
		cmd  studio.Command
		want string
	}{
		{studio.DeleteScheduleCommand{Schedule: w.nightly.ID}, `Delete schedule "nightly"`},
		{studio.DeleteScheduleCommand{Schedule: "nightly"}, `Delete schedule "nightly"`},
		{studio.SetScheduleEnabledCommand{Schedule: w.nightly.ID, Enabled: ptr(false)}, `Pause schedule "nightly"`},
	} {
		if prep, err := w.svc.Prepare(w.ctx, c.cmd); err != nil || prep.Summary != c.want {
			t.Errorf("%s summary %q (%v), want %q", studio.TypeOf(c.cmd), prep.Summary, err, c.want)
		}
	}
	for _, sp := range studio.Commands() {
		if sp.Impact.Irreversible() && !sp.Impact.Destructive() {
			t.Errorf("%s: irreversible but not destructive", sp.Type)
		}
	}
}

// A workflow whose step no longer binds (its playbook later declared a
// required argument the step does not give) is refused before it is
// proposed, and launches nothing; the error names the step as people
// count it.
func TestLaunchWorkflowBindsArgs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pb := w.exec(studio.CreatePlaybookCommand{Name: "deploy", Prompt: "Deploy."}).Playbook
	w.exec(studio.CreateWorkflowCommand{Name: "ship", Steps: []studio.WorkflowStepInput{{Playbook: "notes"}, {Playbook: "deploy"}}})
	w.exec(studio.UpdatePlaybookCommand{Playbook: "deploy", ExpectedVersion: pb.Version, Args: &[]studio.PlaybookArg{{Name: "env", Required: true}}})
	_, err := w.svc.Prepare(w.ctx, studio.LaunchWorkflowCommand{Workflow: "ship"})
	if pe := wantCode(t, err, protocol.Validation); pe.Details["step"] != 2 || pe.Details["field"] != "steps[1].args" || !strings.HasPrefix(pe.Message, "step 2: ") {
		t.Errorf("the launch's error = %+v", pe)
	}
	before := w.snapshot()
	_, err = w.svc.Execute(w.ctx, studio.LaunchWorkflowCommand{Workflow: "ship"}, studio.ExecOptions{})
	wantCode(t, err, protocol.Validation)
	if w.snapshot() != before {
		t.Fatal("a refused launch changed something")
	}
}

// TestWorkflowArgsCheckedWhenSaved: a step that leaves a required argument
// unset, or sets one its playbook does not declare, is refused when the
// workflow is created or its steps are changed, not at launch; the error
// names the step (1-based) and its field (0-based), and nothing is saved.
func TestWorkflowArgsCheckedWhenSaved(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	before := w.snapshot()
	for _, c := range []struct {
		name string
		cmd  studio.Command
		step int
		msg  string
	}{
		{"create without a required argument", studio.CreateWorkflowCommand{Name: "rel", Steps: []studio.WorkflowStepInput{{Playbook: "notes"}, {Playbook: "audit-repo"}}}, 2, `needs argument "repo"`},
		{"create with an undeclared argument", studio.CreateWorkflowCommand{Name: "rel", Steps: []studio.WorkflowStepInput{{Playbook: "notes", Args: map[string]string{"repo": "x"}}}}, 1, `has no argument "repo"`},
		{"update without a required argument", studio.UpdateWorkflowCommand{Workflow: "release", ExpectedVersion: w.release.Version,
			Steps: &[]studio.WorkflowStepInput{{Playbook: "audit-repo", Args: map[string]string{"repo": "a"}}, {Playbook: "notes"}, {Playbook: "audit-repo", Input: "no repo"}}}, 3, `needs argument "repo"`},
	} {
		_, err := w.svc.Execute(w.ctx, c.cmd, studio.ExecOptions{})
		pe := wantCode(t, err, protocol.Validation)
		if pe.Details["step"] != c.step || pe.Details["field"] != fmt.Sprintf("steps[%d].args", c.step-1) ||
			!strings.HasPrefix(pe.Message, fmt.Sprintf("step %d: ", c.step)) || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%s: %+v", c.name, pe)
		}
	}
	if w.snapshot() != before {
		t.Fatal("a refused workflow changed something")
	}
	// Arguments with defaults may be left unset: the default is saved.
	res := w.exec(studio.CreateWorkflowCommand{Name: "rel", Steps: []studio.WorkflowStepInput{{Playbook: "audit-repo", Args: map[string]string{"repo": "a"}}}})
	if got := res.Workflow.Steps[0].Args; got["focus"] != "security" || got["repo"] != "a" {
		t.Fatalf("saved args = %v", got)
	}
}

// TestPrepareRunsEveryCheckOfExecute: a command that Execute would refuse — a
// stale expectedVersion, a name another resource has — is refused by Prepare
// the same way, so it never becomes a proposal a human confirms in vain
// (docs/design.md §9.3, step 1); a rename to the resource's own name is no
// conflict.
func TestPrepareRunsEveryCheckOfExecute(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	stale := w.audit.Version + 1
	for _, c := range []struct {
		name string
		cmd  studio.Command
	}{
		{"stale playbook update", studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: stale, Description: ptr("x")}},
		{"stale playbook delete", studio.DeletePlaybookCommand{Playbook: "notes", ExpectedVersion: w.notes.Version + 1}},
		{"stale schedule update", studio.UpdateScheduleCommand{Schedule: "nightly", ExpectedVersion: w.nightly.Version + 1, Cron: ptr("0 3 * * *")}},
		{"stale schedule delete", studio.DeleteScheduleCommand{Schedule: "nightly", ExpectedVersion: w.nightly.Version + 1}},
		{"taken playbook name", studio.CreatePlaybookCommand{Name: "notes", Prompt: "p"}},
		{"playbook renamed to a taken name", studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: w.audit.Version, Name: ptr("notes")}},
		{"taken workflow name", studio.CreateWorkflowCommand{Name: "release", Steps: []studio.WorkflowStepInput{{Playbook: "notes"}}}},
		{"workflow renamed to a taken name", studio.UpdateWorkflowCommand{Workflow: "release", ExpectedVersion: w.release.Version, Name: ptr("ship-it")}},
		{"taken schedule name", studio.CreateScheduleCommand{Name: "nightly", Cron: "0 4 * * *", Playbook: "notes"}},
	} {
		_, perr := w.svc.Prepare(w.ctx, c.cmd)
		_, eerr := w.svc.Execute(w.ctx, c.cmd, studio.ExecOptions{})
		if protocol.CodeOf(perr) != protocol.Conflict || protocol.CodeOf(eerr) != protocol.Conflict {
			t.Errorf("%s: Prepare %v, Execute %v; want conflict from both", c.name, perr, eerr)
		}
	}
	if _, err := w.svc.Prepare(w.ctx, studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: w.audit.Version,
		Name: ptr("audit-repo"), Description: ptr("same name")}); err != nil {
		t.Fatalf("keeping its own name: %v", err)
	}
}

// TestGetRunByShortID: a run is found by the short id lists and the
// command line show (a unique prefix of its id); a prefix several runs
// share is a validation error naming them, never one of them.
func TestGetRunByShortID(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pb := w.notes
	for _, id := range []string{"1c4f61d7-0000-4000-8000-000000000001", "1c4f61d7-0000-4000-8000-000000000002", "2d5a0000-0000-4000-8000-000000000003"} {
		if _, err := w.st.CreateRun(w.ctx, store.CreateRunParams{ID: id, PlaybookID: pb.ID, Trigger: store.TriggerManual, Now: w.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := w.svc.GetRun(w.ctx, "2D5A0000")
	if err != nil || r.ID != "2d5a0000-0000-4000-8000-000000000003" {
		t.Fatalf("GetRun(2D5A0000) = %s, %v", r.ID, err)
	}
	_, err = w.svc.GetRun(w.ctx, "1c4f61d7")
	pe := wantCode(t, err, protocol.Validation)
	if pe.Details["reason"] != "ambiguous" || len(pe.Details["matches"].([]string)) != 2 || !strings.Contains(pe.Message, "ambiguous") {
		t.Fatalf("an ambiguous prefix: %+v", pe)
	}
	r, err = w.svc.GetRun(w.ctx, "1c4f61d7-0000-4000-8000-000000000002")
	if err != nil || r.ID != "1c4f61d7-0000-4000-8000-000000000002" {
		t.Fatalf("a full id: %s, %v", r.ID, err)
	}
	for _, ref := range []string{"1c4", "ffff0000", "1c4f%", "1c4f_1d7"} {
		_, err = w.svc.GetRun(w.ctx, ref)
		wantCode(t, err, protocol.NotFound)
	}
}
