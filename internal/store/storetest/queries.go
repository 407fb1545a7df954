package storetest

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The cockpit's queries: run search, output, activity, workflows, the audit's filters.

func testRunSearch(t *testing.T, f *fixture) {
	audit, notes := f.playbook("audit_repo"), f.playbook("Release-Notes")
	start := f.clock.Now()
	a := f.queueRun(audit, store.TriggerManual)
	b, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: notes.ID, Input: "Ship 100% of v2",
		Trigger: store.TriggerOperator, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(q string) []string {
		t.Helper()
		runs, err := f.s.ListRuns(f.ctx, store.ListRunsParams{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"release", []string{b.ID}},   // playbook name, any case
		{"SHIP 100%", []string{b.ID}}, // input, any case; % is literal
		{"_repo", []string{a.ID}},     // _ is literal
		{"repo x", []string{a.ID}},    // input
		{a.ID[:8], []string{a.ID}},    // id prefix
		{a.ID[4:12], nil},             // not an id prefix, nor in a name or input
		{"zzz", nil},
	} {
		if got := ids(tc.q); len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
			t.Errorf("q=%q: %v, want %v", tc.q, got, tc.want)
		}
	}
	// IDPrefix: the start of the id only, never a name or input; LIKE's
	// wildcards are literal.
	for _, tc := range []struct {
		prefix string
		want   []string
	}{{a.ID[:8], []string{a.ID}}, {b.ID[:4], []string{b.ID}}, {a.ID, []string{a.ID}}, {"release", nil}, {a.ID[:7] + "%", nil}, {"_" + a.ID[1:8], nil}} {
		runs, err := f.s.ListRuns(f.ctx, store.ListRunsParams{IDPrefix: tc.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != len(tc.want) || (len(runs) == 1 && runs[0].ID != tc.want[0]) {
			t.Errorf("IDPrefix %q: %d runs, want %v", tc.prefix, len(runs), tc.want)
		}
	}
	st, err := f.s.RunStats(f.ctx, store.RunStatsParams{Since: start, Until: f.tick(), Query: "notes"})
	if err != nil || st.Total != 1 || st.Counts[store.RunQueued] != 1 {
		t.Fatalf("filtered stats = %+v, %v", st, err)
	}
	st, err = f.s.RunStats(f.ctx, store.RunStatsParams{Since: start, Until: f.tick(), Trigger: store.TriggerManual, PlaybookID: audit.ID})
	if err != nil || st.Total != 1 {
		t.Fatalf("stats by trigger and playbook = %+v, %v", st, err)
	}
}

func testRunSaveOutput(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	r := f.queueRun(pb, store.TriggerManual)
	err := f.s.SaveRunOutput(f.ctx, store.SaveRunOutputParams{ID: r.ID, Output: "early", Now: f.tick()})
	if pe := wantCode(t, err, protocol.Conflict); pe.Details["status"] != "queued" {
		t.Fatalf("details %v", pe.Details)
	}
	running := f.claim()
	for _, out := range []string{"part", "part two"} {
		if err := f.s.SaveRunOutput(f.ctx, store.SaveRunOutputParams{ID: r.ID, Output: out, Truncated: out == "part two", Now: f.tick()}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.s.GetRun(f.ctx, r.ID)
	if err != nil || got.Output != "part two" || !got.OutputTruncated || got.Version != running.Version || got.Status != store.RunRunning {
		t.Fatalf("run with partial output = %+v, %v (version must stay %d)", got, err, running.Version)
	}
	if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: store.RunSucceeded, Output: "final", Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, f.s.SaveRunOutput(f.ctx, store.SaveRunOutputParams{ID: r.ID, Output: "late", Now: f.tick()}), protocol.Conflict)
	if got, _ := f.s.GetRun(f.ctx, r.ID); got.Output != "final" {
		t.Fatalf("a late partial overwrote the final output: %q", got.Output)
	}
	wantCode(t, f.s.SaveRunOutput(f.ctx, store.SaveRunOutputParams{ID: newID(), Now: f.tick()}), protocol.NotFound)
}

func testRunActivity(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	t0 := f.clock.Now()
	edges := []time.Time{t0, t0.Add(time.Hour), t0.Add(2 * time.Hour), t0.Add(3 * time.Hour)}
	// Hour 0: a failed run of 3 s and a succeeded one of 45 s; hour 2: one
	// succeeded of 1 s and one queued. Nothing in hour 1.
	finish := func(d time.Duration, status store.RunStatus) {
		f.queueRun(pb, store.TriggerManual)
		r := f.claim()
		f.clock.Advance(d)
		if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: status, Now: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	finish(3*time.Second, store.RunFailed)
	finish(45*time.Second, store.RunSucceeded)
	f.clock.Set(t0.Add(2*time.Hour + time.Minute))
	finish(500*time.Millisecond, store.RunSucceeded)
	f.queueRun(pb, store.TriggerManual)
	f.clock.Set(t0.Add(5 * time.Hour))
	f.queueRun(pb, store.TriggerManual) // after the last edge: not counted

	bounds := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
	a, err := f.s.RunActivity(f.ctx, store.RunActivityParams{Edges: edges, DurationBounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Buckets) != 3 || a.Total != 4 ||
		a.Buckets[0][store.RunFailed] != 1 || a.Buckets[0][store.RunSucceeded] != 1 ||
		a.Buckets[1][store.RunSucceeded] != 0 || a.Buckets[2][store.RunSucceeded] != 1 || a.Buckets[2][store.RunQueued] != 1 {
		t.Fatalf("activity buckets = %+v (total %d)", a.Buckets, a.Total)
	}
	// 0.5 s < 1 s; 3 s in [1, 5); 45 s in [30, ∞).
	if a.Finished != 3 || len(a.Durations) != 4 || a.Durations[0] != 1 || a.Durations[1] != 1 || a.Durations[2] != 0 || a.Durations[3] != 1 {
		t.Fatalf("durations = %v (finished %d)", a.Durations, a.Finished)
	}
	if a.Median == nil || *a.Median != 3*time.Second || a.P90 == nil || *a.P90 != 45*time.Second {
		t.Fatalf("median %v, p90 %v", a.Median, a.P90)
	}
	empty, err := f.s.RunActivity(f.ctx, store.RunActivityParams{Edges: []time.Time{t0.Add(-2 * time.Hour), t0.Add(-time.Hour)}})
	if err != nil || empty.Total != 0 || empty.Finished != 0 || empty.Median != nil || len(empty.Durations) != 1 {
		t.Fatalf("empty activity = %+v, %v", empty, err)
	}
	_, err = f.s.RunActivity(f.ctx, store.RunActivityParams{Edges: []time.Time{t0, t0}})
	wantCode(t, err, protocol.Validation)
}

func testRunWorkflow(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	wf := newID()
	var ids []string
	for step := range 2 {
		r, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, Trigger: store.TriggerManual,
			WorkflowID: &wf, WorkflowStep: &step, Now: f.tick()})
		if err != nil {
			t.Fatal(err)
		}
		if r.WorkflowID == nil || *r.WorkflowID != wf || r.WorkflowStep == nil || *r.WorkflowStep != step {
			t.Fatalf("run of step %d = %+v", step, r)
		}
		ids = append(ids, r.ID)
	}
	lone := f.queueRun(pb, store.TriggerManual)
	if lone.WorkflowID != nil || lone.WorkflowStep != nil {
		t.Fatalf("a run of its own has a workflow: %+v", lone)
	}
	runs, err := f.s.ListRuns(f.ctx, store.ListRunsParams{WorkflowID: wf})
	if err != nil || len(runs) != 2 || runs[0].ID != ids[1] || runs[1].ID != ids[0] {
		t.Fatalf("the workflow's runs = %v, %v", runs, err)
	}
}

func testAuditFilters(t *testing.T, f *fixture) {
	t0 := f.clock.Now()
	add := func(actor, action, target, details string) store.AdminEvent {
		t.Helper()
		e, err := f.s.AppendAdminEvent(f.ctx, store.AppendAdminEventParams{Actor: actor, Action: action, TargetID: ptr(target),
			Details: []byte(details), Now: f.tick()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	run, proposal := newID(), newID()
	launch := add("studio_cockpit", "studio.app.command", run, `{"commandType":"launch_playbook","trigger":"manual"}`)
	op := add("studio_operator", "studio.operator.command", proposal,
		`{"proposal_id":"`+proposal+`","command_type":"cancel_run","target":{"kind":"run","id":"`+run+`","version":"2"}}`)
	f.clock.Advance(time.Hour)
	late := add("studio_cockpit", "studio.app.command", newID(), `{"commandType":"launch_playbook_x"}`)
	ids := func(p store.ListAdminEventsParams) []int64 {
		t.Helper()
		p.Limit = 100
		es, err := f.s.ListAdminEvents(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	since, until := t0, t0.Add(30*time.Minute)
	for name, tc := range map[string]struct {
		p    store.ListAdminEventsParams
		want []int64
	}{
		"actor":                 {store.ListAdminEventsParams{Actor: "studio_operator"}, []int64{op.ID}},
		"command type, exact":   {store.ListAdminEventsParams{CommandType: "launch_playbook"}, []int64{launch.ID}},
		"command_type (ADR D8)": {store.ListAdminEventsParams{CommandType: "cancel_run"}, []int64{op.ID}},
		"target: row or named":  {store.ListAdminEventsParams{Target: run}, []int64{op.ID, launch.ID}},
		"target: proposal":      {store.ListAdminEventsParams{Target: proposal}, []int64{op.ID}},
		"time":                  {store.ListAdminEventsParams{Since: &since, Until: &until}, []int64{op.ID, launch.ID}},
		"after":                 {store.ListAdminEventsParams{Since: &until}, []int64{late.ID}},
		"combined":              {store.ListAdminEventsParams{Actor: "studio_cockpit", Target: run, Until: &until}, []int64{launch.ID}},
		"like is literal":       {store.ListAdminEventsParams{CommandType: "launch%"}, nil},
	} {
		got := ids(tc.p)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", name, got, tc.want)
			}
		}
	}
}

func testWorkflowLaunchDelete(t *testing.T, f *fixture) {
	a, b := f.playbook("a"), f.playbook("b")
	w, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "release",
		Steps: []store.WorkflowStep{{PlaybookID: a.ID, Input: "first", Args: map[string]string{"k": "v"}}, {PlaybookID: b.ID, Input: "second"}}, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	before := len(f.events("studio.app.command"))
	// A stale version or a wrong number of steps launches nothing.
	_, err = f.s.LaunchWorkflow(f.ctx, store.LaunchWorkflowParams{WorkflowID: w.ID, ExpectedVersion: 2, RunIDs: []string{newID(), newID()},
		Trigger: store.TriggerManual, Now: f.tick(), Audit: auditRow(f, w.ID)})
	wantVersionConflict(t, err, 2, 1)
	_, err = f.s.LaunchWorkflow(f.ctx, store.LaunchWorkflowParams{WorkflowID: w.ID, RunIDs: []string{newID()},
		Trigger: store.TriggerManual, Now: f.tick(), Audit: auditRow(f, w.ID)})
	wantCode(t, err, protocol.Conflict)
	if runs, _ := f.s.ListRuns(f.ctx, store.ListRunsParams{}); len(runs) != 0 || len(f.events("studio.app.command")) != before {
		t.Fatalf("a refused launch left %d runs", len(runs))
	}
	runs, err := f.s.LaunchWorkflow(f.ctx, store.LaunchWorkflowParams{WorkflowID: w.ID, ExpectedVersion: 1, RunIDs: []string{newID(), newID()},
		Args: []map[string]string{nil, {"x": "y"}}, Trigger: store.TriggerOperator, Now: f.tick(), Audit: auditRow(f, w.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].PlaybookID != a.ID || runs[0].Input != "first" || runs[0].Args["k"] != "v" ||
		*runs[0].WorkflowID != w.ID || *runs[0].WorkflowStep != 0 || runs[1].PlaybookID != b.ID || runs[1].Args["x"] != "y" ||
		*runs[1].WorkflowStep != 1 || runs[1].Trigger != store.TriggerOperator || runs[0].Status != store.RunQueued {
		t.Fatalf("launched runs = %+v", runs)
	}
	if n := len(f.events("studio.app.command")); n != before+1 {
		t.Fatalf("a launch wrote %d audit rows, want 1", n-before)
	}
	// The oldest step is claimed first.
	if r := f.claim(); r.ID != runs[0].ID {
		t.Fatalf("claimed step %v first", r.WorkflowStep)
	}

	_, err = f.s.DeleteWorkflow(f.ctx, store.DeleteWorkflowParams{ID: w.ID, ExpectedVersion: 2, Audit: auditRow(f, w.ID)})
	wantVersionConflict(t, err, 2, 1)
	gone, err := f.s.DeleteWorkflow(f.ctx, store.DeleteWorkflowParams{ID: w.ID, ExpectedVersion: 1, Audit: auditRow(f, w.ID)})
	if err != nil || gone.Name != "release" || len(gone.Steps) != 2 {
		t.Fatalf("deleted = %+v, %v", gone, err)
	}
	_, err = f.s.GetWorkflow(f.ctx, w.ID)
	wantCode(t, err, protocol.NotFound)
	if left, _ := f.s.ListRuns(f.ctx, store.ListRunsParams{WorkflowID: w.ID}); len(left) != 2 {
		t.Fatalf("the workflow's runs went with it: %d left", len(left))
	}
	// Its playbooks are free to delete now.
	if _, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: b.ID}); err != nil {
		t.Fatalf("delete a playbook the deleted workflow used: %v", err)
	}
	_, err = f.s.DeleteWorkflow(f.ctx, store.DeleteWorkflowParams{ID: w.ID})
	wantCode(t, err, protocol.NotFound)
}
