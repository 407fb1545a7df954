package main

import (
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/studio"
)

// TestProcessScheduleEdit: schedules edit changes the cron (and with it
// the next run), the arguments and the name in place, through
// update_schedule; a version someone else moved is a conflict (exit 4)
// that changes nothing; nothing to change is a usage error.
func TestProcessScheduleEdit(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)
	ctx := testCtx(t)

	before, err := d.client.GetSchedule(ctx, "nightly-audit")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := c.run(exitOK, "schedules", "edit", "nightly-audit", "--cron", "0 4 * * *")
	if !strings.Contains(out, "0 4 * * *") {
		t.Fatalf("schedules edit --cron prints the schedule: %s", out)
	}
	after, err := d.client.GetSchedule(ctx, "nightly-audit")
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID || after.Cron != "0 4 * * *" || after.Version != before.Version+1 {
		t.Fatalf("after edit --cron: %+v (before %+v)", after, before)
	}
	if after.Enabled && (after.NextRunAt == nil || time.Unix(int64(*after.NextRunAt), 0).UTC().Hour() != 4) {
		t.Fatalf("the next run does not follow the new cron: %v", after.NextRunAt)
	}

	// Arguments replace the old ones; the name changes; both in one edit.
	c.run(exitOK, "schedules", "edit", "nightly-audit", "--arg", "repo=acme/web", "--name", "nightly-web")
	s, err := d.client.GetSchedule(ctx, "nightly-web")
	if err != nil || s.Args["repo"] != "acme/web" || s.ID != before.ID {
		t.Fatalf("after edit --arg --name: %+v %v", s, err)
	}

	// An argument the playbook does not declare is refused by the server.
	if _, errOut := c.run(exitFailure, "schedules", "edit", "nightly-web", "--arg", "colour=red"); !strings.Contains(errOut, `no argument "colour"`) {
		t.Fatalf("an undeclared argument: %s", errOut)
	}
	// A stale --expected-version is a conflict and changes nothing.
	if _, errOut := c.run(exitConflict, "schedules", "edit", "nightly-web", "--cron", "0 5 * * *", "--expected-version", "1"); errOut == "" {
		t.Fatal("a stale version says nothing")
	}
	if s2, _ := d.client.GetSchedule(ctx, "nightly-web"); s2.Cron != "0 4 * * *" || s2.Version != s.Version {
		t.Fatalf("a refused edit changed the schedule: %+v", s2)
	}
	c.run(exitUsage, "schedules", "edit", "nightly-web")
	c.run(exitUsage, "schedules", "edit", "nightly-web", "--arg", "repo=x", "--clear-args")
	c.run(exitNotFound, "schedules", "edit", "no-such-schedule", "--cron", "0 4 * * *")
}

// TestProcessWorkflowCreateChecksArguments: a step that leaves a required
// argument of its playbook unset is refused when the workflow is created
// (not when it is launched), naming the step as people count it and the
// argument; nothing is created.
func TestProcessWorkflowCreateChecksArguments(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)

	_, errOut := c.run(exitFailure, "workflows", "create", "release", "--step", "summarize-failed-runs", "--step", "audit-repo")
	if !strings.Contains(errOut, "step 2") || !strings.Contains(errOut, `"repo"`) || strings.Contains(errOut, "steps[1]") {
		t.Fatalf("a step without its required argument: %s", errOut)
	}
	if _, err := d.client.GetWorkflow(testCtx(t), "release"); err == nil {
		t.Fatal("the refused workflow was created")
	}
	var wf studio.Workflow
	c.json(&wf, "workflows", "create", "release", "--step", `{"playbook":"audit-repo","args":{"repo":"acme/api"}}`, "-o", "json")
	if len(wf.Steps) != 1 || wf.Steps[0].Args["repo"] != "acme/api" {
		t.Fatalf("the workflow with its argument: %+v", wf)
	}
}
