package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseApp runs the conformance suite of store.AppStore: the application
// resources, their optimistic versions, audit rows that commit with their
// change, exactly-once schedule slots, retention and diagnostics. Like
// Exercise, open must return a fresh, migrated store closed in t.Cleanup.
func ExerciseApp(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := func(name string, fn func(t *testing.T, f *fixture)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newFixture(t, open))
		})
	}
	run("Playbook/CreateGet", testPlaybookCreateGet)
	run("Playbook/DuplicateName", testPlaybookDuplicate)
	run("Playbook/Missing", testPlaybookMissing)
	run("Playbook/UpdateVersions", testPlaybookUpdate)
	run("Playbook/ListSearchPaging", testPlaybookList)
	run("Playbook/DeleteInUse", testPlaybookDelete)
	run("Audit/CommitsWithChange", testAppAudit)

	run("Workflow/CreateGetUpdate", testWorkflow)
	run("Workflow/UnknownPlaybookLeavesNothing", testWorkflowUnknownPlaybook)

	run("Run/Lifecycle", testRunLifecycle)
	run("Run/PinsPlaybookVersion", testRunPinsVersion)
	run("Run/Cancel", testRunCancel)
	run("Run/ClaimConcurrent", testRunClaimConcurrent)
	run("Run/Recover", testRunRecover)
	run("Run/ListFiltersPaging", testRunList)
	run("Run/Retry", testRunRetry)
	run("Run/Stats", testRunStats)

	run("Schedule/CreateGetUpdateDelete", testScheduleCRUD)
	run("Schedule/DueAndFireOnce", testScheduleFireOnce)
	run("Schedule/FireConcurrent", testScheduleFireConcurrent)
	run("Schedule/FireSkips", testScheduleSkips)

	run("Retention/PurgeFrames", testPurgeFrames)
	run("Retention/PurgeDeletedConversations", testPurgeDeleted)
	run("Diagnostics", testDiagnostics)
}

func (f *fixture) playbook(name string, args ...store.PlaybookArg) store.Playbook {
	f.t.Helper()
	p, err := f.s.CreatePlaybook(f.ctx, store.CreatePlaybookParams{ID: newID(), Project: "studio", Name: name,
		Description: "about " + name, Prompt: "do " + name, Args: args, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreatePlaybook(%s): %v", name, err)
	}
	return p
}

func (f *fixture) queueRun(pb store.Playbook, trigger store.RunTrigger) store.Run {
	f.t.Helper()
	r, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, Input: "repo x",
		Args: map[string]string{"k": "v"}, Trigger: trigger, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreateRun: %v", err)
	}
	return r
}

func (f *fixture) claim() store.Run {
	f.t.Helper()
	r, ok, err := f.s.ClaimRun(f.ctx, store.ClaimRunParams{Now: f.tick()})
	if err != nil || !ok {
		f.t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	return r
}

func (f *fixture) events(action string) []store.AdminEvent {
	f.t.Helper()
	es, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Action: action, Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

// wantVersionConflict checks a conflict's expected/actual version details.
func wantVersionConflict(t *testing.T, err error, expected, actual int64) {
	t.Helper()
	pe := wantCode(t, err, protocol.Conflict)
	if detailInt(t, pe, "expectedVersion") != expected || detailInt(t, pe, "actualVersion") != actual {
		t.Fatalf("conflict details = %v, want expectedVersion %d actualVersion %d", pe.Details, expected, actual)
	}
}

func auditRow(f *fixture, target string) *store.AppendAdminEventParams {
	return &store.AppendAdminEventParams{Actor: "studio_cockpit", Action: "studio.app.command", TargetID: ptr(target),
		Details: []byte(`{"commandType":"test"}`), Now: f.clock.Now()}
}

// --- playbooks ---------------------------------------------------------------

func testPlaybookCreateGet(t *testing.T, f *fixture) {
	def := "tests"
	args := []store.PlaybookArg{{Name: "repo", Description: "the repo", Required: true}, {Name: "focus", Default: &def}}
	p := f.playbook("audit-repo", args...)
	byID, err := f.s.GetPlaybook(f.ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName, err := f.s.GetPlaybookByName(f.ctx, "audit-repo")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []store.Playbook{p, byID, byName} {
		if got.ID != p.ID || got.Name != "audit-repo" || got.Project != "studio" || got.Prompt != "do audit-repo" ||
			got.Description != "about audit-repo" || got.Version != 1 || !got.CreatedAt.Equal(got.UpdatedAt) {
			t.Fatalf("playbook = %+v", got)
		}
		if len(got.Args) != 2 || got.Args[0].Name != "repo" || !got.Args[0].Required || got.Args[0].Description != "the repo" ||
			got.Args[1].Default == nil || *got.Args[1].Default != "tests" || got.Args[1].Required {
			t.Fatalf("args = %+v", got.Args)
		}
	}
	bare := f.playbook("bare")
	if bare.Args == nil || len(bare.Args) != 0 {
		t.Fatalf("no args read back as %#v, want an empty list", bare.Args)
	}
}

func testPlaybookDuplicate(t *testing.T, f *fixture) {
	p := f.playbook("dup")
	_, err := f.s.CreatePlaybook(f.ctx, store.CreatePlaybookParams{ID: newID(), Project: "x", Name: "dup", Prompt: "p",
		Now: f.tick(), Audit: auditRow(f, "x")})
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["id"] != p.ID {
		t.Fatalf("duplicate conflict details = %v, want the owner's id", pe.Details)
	}
	if n := len(f.events("studio.app.command")); n != 0 {
		t.Fatalf("a refused create appended %d audit rows", n)
	}
}

func testPlaybookMissing(t *testing.T, f *fixture) {
	_, err := f.s.GetPlaybook(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.GetPlaybookByName(f.ctx, "nope")
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: newID(), Prompt: ptr("x"), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: newID()})
	wantCode(t, err, protocol.NotFound)
}

func testPlaybookUpdate(t *testing.T, f *fixture) {
	p := f.playbook("one")
	f.playbook("two")
	now := f.tick()
	args := []store.PlaybookArg{{Name: "x"}}
	up, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("new prompt"),
		Args: &args, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != 2 || up.Prompt != "new prompt" || up.Name != "one" || up.Description != "about one" ||
		len(up.Args) != 1 || !up.UpdatedAt.Equal(now) || !up.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("updated = %+v", up)
	}
	// A stale version changes nothing.
	_, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("lost"), Now: f.tick()})
	wantVersionConflict(t, err, 1, 2)
	// The name of another playbook is taken.
	_, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 2, Name: ptr("two"), Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	// Version 0 means no expectation.
	up, err = f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, Name: ptr("uno"), Now: f.tick()})
	if err != nil || up.Version != 3 || up.Name != "uno" || up.Prompt != "new prompt" {
		t.Fatalf("rename = %+v, %v", up, err)
	}
	if _, err := f.s.GetPlaybookByName(f.ctx, "one"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("old name still resolves: %v", err)
	}
}

func testPlaybookList(t *testing.T, f *fixture) {
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("pb-%02d", i)
		want = append(want, name)
		f.playbook(name)
	}
	var got []string
	after := ""
	for range 10 {
		page, err := f.s.ListPlaybooks(f.ctx, store.ListPlaybooksParams{AfterName: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			got = append(got, p.Name)
		}
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].Name
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged names = %v, want %v", got, want)
	}
	// Search is case-insensitive over name and description; % and _ are literal.
	f.playbook("release_notes")
	for _, tc := range []struct {
		q    string
		want int
	}{{"PB-1", 10}, {"about pb-2", 5}, {"_notes", 1}, {"%", 0}, {"nothing", 0}} {
		page, err := f.s.ListPlaybooks(f.ctx, store.ListPlaybooksParams{Query: tc.q, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != tc.want {
			t.Fatalf("query %q matched %d, want %d", tc.q, len(page), tc.want)
		}
	}
	other, err := f.s.CreatePlaybook(f.ctx, store.CreatePlaybookParams{ID: newID(), Project: "other", Name: "zz", Prompt: "p", Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.s.ListPlaybooks(f.ctx, store.ListPlaybooksParams{Project: "other"})
	if err != nil || len(page) != 1 || page[0].ID != other.ID {
		t.Fatalf("project filter = %+v, %v", page, err)
	}
}

func testPlaybookDelete(t *testing.T, f *fixture) {
	used := f.playbook("used")
	free := f.playbook("free")
	if _, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "wf",
		Steps: []store.WorkflowStep{{PlaybookID: used.ID}}, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CreateSchedule(f.ctx, store.CreateScheduleParams{ID: newID(), Project: "p", Name: "nightly", Cron: "0 2 * * *",
		PlaybookID: used.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: used.ID, Audit: auditRow(f, used.ID)})
	pe := wantCode(t, err, protocol.Conflict)
	users, _ := pe.Details["usedBy"].([]string)
	if !slices.Equal(users, []string{"schedule nightly", "workflow wf"}) {
		t.Fatalf("usedBy = %#v", pe.Details["usedBy"])
	}
	_, err = f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: free.ID, ExpectedVersion: 2})
	wantVersionConflict(t, err, 2, 1)
	if n := len(f.events("studio.app.command")); n != 0 {
		t.Fatalf("refused deletes appended %d audit rows", n)
	}
	gone, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: free.ID, ExpectedVersion: 1, Audit: auditRow(f, free.ID)})
	if err != nil || gone.ID != free.ID || gone.Name != "free" {
		t.Fatalf("delete = %+v, %v", gone, err)
	}
	if _, err := f.s.GetPlaybook(f.ctx, free.ID); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("deleted playbook: %v", err)
	}
	if n := len(f.events("studio.app.command")); n != 1 {
		t.Fatalf("the delete appended %d audit rows, want 1", n)
	}
}

func testAppAudit(t *testing.T, f *fixture) {
	p := f.playbook("audited")
	if _, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("x"),
		Now: f.tick(), Audit: auditRow(f, p.ID)}); err != nil {
		t.Fatal(err)
	}
	// The same change again fails on its version: neither it nor its audit row stays.
	_, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: p.ID, ExpectedVersion: 1, Prompt: ptr("y"),
		Now: f.tick(), Audit: auditRow(f, p.ID)})
	wantCode(t, err, protocol.Conflict)
	es := f.events("studio.app.command")
	if len(es) != 1 || es[0].TargetID == nil || *es[0].TargetID != p.ID || es[0].Actor != "studio_cockpit" {
		t.Fatalf("audit rows = %+v, want exactly the successful update's", es)
	}
	// Each mutating call commits its audit row.
	pb2 := f.playbook("second")
	r, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb2.ID, Trigger: store.TriggerManual, Now: f.tick(), Audit: auditRow(f, pb2.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CancelRun(f.ctx, store.CancelRunParams{ID: r.ID, Now: f.tick(), Audit: auditRow(f, r.ID)}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.events("studio.app.command")); n != 3 {
		t.Fatalf("%d audit rows, want 3", n)
	}
}

// --- workflows ---------------------------------------------------------------

func testWorkflow(t *testing.T, f *fixture) {
	a, b := f.playbook("a"), f.playbook("b")
	w, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "release", Description: "ship",
		Steps: []store.WorkflowStep{{PlaybookID: a.ID, Input: "first", Args: map[string]string{"k": "v"}}, {PlaybookID: b.ID}}, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	byName, err := f.s.GetWorkflowByName(f.ctx, "release")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []store.Workflow{w, byName} {
		if got.Version != 1 || len(got.Steps) != 2 || got.Steps[0].PlaybookName != "a" || got.Steps[0].Input != "first" ||
			got.Steps[0].Args["k"] != "v" || got.Steps[1].PlaybookID != b.ID || got.Steps[1].PlaybookName != "b" {
			t.Fatalf("workflow = %+v", got)
		}
	}
	steps := []store.WorkflowStep{{PlaybookID: b.ID}}
	up, err := f.s.UpdateWorkflow(f.ctx, store.UpdateWorkflowParams{ID: w.ID, ExpectedVersion: 1, Steps: &steps, Now: f.tick()})
	if err != nil || up.Version != 2 || len(up.Steps) != 1 || up.Steps[0].PlaybookName != "b" || up.Description != "ship" {
		t.Fatalf("update = %+v, %v", up, err)
	}
	_, err = f.s.UpdateWorkflow(f.ctx, store.UpdateWorkflowParams{ID: w.ID, ExpectedVersion: 1, Name: ptr("x"), Now: f.tick()})
	wantVersionConflict(t, err, 1, 2)
	_, err = f.s.UpdateWorkflow(f.ctx, store.UpdateWorkflowParams{ID: newID(), Name: ptr("x"), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	list, err := f.s.ListWorkflows(f.ctx, store.ListWorkflowsParams{Query: "SHIP"})
	if err != nil || len(list) != 1 || len(list[0].Steps) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	// a is no longer used, b is.
	if _, err := f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = f.s.DeletePlaybook(f.ctx, store.DeletePlaybookParams{ID: b.ID})
	wantCode(t, err, protocol.Conflict)
}

func testWorkflowUnknownPlaybook(t *testing.T, f *fixture) {
	a := f.playbook("a")
	_, err := f.s.CreateWorkflow(f.ctx, store.CreateWorkflowParams{ID: newID(), Project: "p", Name: "broken",
		Steps: []store.WorkflowStep{{PlaybookID: a.ID}, {PlaybookID: newID()}}, Now: f.tick(), Audit: auditRow(f, "w")})
	wantCode(t, err, protocol.NotFound)
	if _, err := f.s.GetWorkflowByName(f.ctx, "broken"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("half a workflow stayed: %v", err)
	}
	if n := len(f.events("studio.app.command")); n != 0 {
		t.Fatalf("audit rows of a failed create: %d", n)
	}
}

// --- runs --------------------------------------------------------------------

func testRunLifecycle(t *testing.T, f *fixture) {
	pb := f.playbook("audit")
	r := f.queueRun(pb, store.TriggerManual)
	if r.Status != store.RunQueued || r.Version != 1 || r.PlaybookName != "audit" || r.PlaybookVersion != 1 ||
		r.Prompt != "do audit" || r.Project != "studio" || r.Input != "repo x" || r.Args["k"] != "v" || r.StartedAt != nil {
		t.Fatalf("queued run = %+v", r)
	}
	// The run keeps what it was launched with when the playbook changes.
	if _, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: pb.ID, Prompt: ptr("changed"), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	started := f.claim()
	if started.ID != r.ID || started.Status != store.RunRunning || started.Version != 2 || started.StartedAt == nil || started.Prompt != "do audit" {
		t.Fatalf("claimed = %+v", started)
	}
	if _, ok, err := f.s.ClaimRun(f.ctx, store.ClaimRunParams{Now: f.tick()}); ok || err != nil {
		t.Fatalf("second claim = %v, %v; nothing is queued", ok, err)
	}
	end := f.tick()
	done, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: store.RunSucceeded, Output: "all good",
		OutputTruncated: true, Now: end})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != store.RunSucceeded || done.Output != "all good" || !done.OutputTruncated || done.Version != 3 ||
		done.EndedAt == nil || !done.EndedAt.Equal(end) || done.ErrorCode != nil {
		t.Fatalf("finished = %+v", done)
	}
	_, err = f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: store.RunFailed, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.GetRun(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: newID(), Trigger: store.TriggerManual, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testRunPinsVersion(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	if _, err := f.s.UpdatePlaybook(f.ctx, store.UpdatePlaybookParams{ID: pb.ID, Prompt: ptr("v2"), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, ExpectedPlaybookVersion: 1,
		Trigger: store.TriggerOperator, Now: f.tick(), Audit: auditRow(f, pb.ID)})
	wantVersionConflict(t, err, 1, 2)
	runs, err := f.s.ListRuns(f.ctx, store.ListRunsParams{})
	if err != nil || len(runs) != 0 || len(f.events("studio.app.command")) != 0 {
		t.Fatalf("a refused launch left runs %v / audit rows (%v)", runs, err)
	}
	r, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, ExpectedPlaybookVersion: 2,
		Trigger: store.TriggerOperator, Now: f.tick()})
	if err != nil || r.PlaybookVersion != 2 || r.Prompt != "v2" || r.Trigger != store.TriggerOperator {
		t.Fatalf("pinned launch = %+v, %v", r, err)
	}
}

func testRunCancel(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	queued := f.queueRun(pb, store.TriggerManual)
	_, err := f.s.CancelRun(f.ctx, store.CancelRunParams{ID: queued.ID, ExpectedVersion: 2, Now: f.tick()})
	wantVersionConflict(t, err, 2, 1)
	c, err := f.s.CancelRun(f.ctx, store.CancelRunParams{ID: queued.ID, ExpectedVersion: 1, Now: f.tick()})
	if err != nil || c.Status != store.RunCancelled || c.EndedAt == nil || c.ErrorCode == nil || *c.ErrorCode != "cancelled" || c.Version != 2 {
		t.Fatalf("cancel queued = %+v, %v", c, err)
	}
	_, err = f.s.CancelRun(f.ctx, store.CancelRunParams{ID: queued.ID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)

	f.queueRun(pb, store.TriggerManual)
	running := f.claim()
	c, err = f.s.CancelRun(f.ctx, store.CancelRunParams{ID: running.ID, Now: f.tick()})
	if err != nil || c.Status != store.RunRunning || c.CancelRequestedAt == nil || c.Version != running.Version+1 {
		t.Fatalf("cancel running = %+v, %v", c, err)
	}
	again, err := f.s.CancelRun(f.ctx, store.CancelRunParams{ID: running.ID, Now: f.tick()})
	if err != nil || again.Version != c.Version || !again.CancelRequestedAt.Equal(*c.CancelRequestedAt) {
		t.Fatalf("repeated cancel = %+v, %v; want it unchanged", again, err)
	}
	_, err = f.s.CancelRun(f.ctx, store.CancelRunParams{ID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testRunClaimConcurrent(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	want := map[string]bool{}
	for range 12 {
		want[f.queueRun(pb, store.TriggerManual).ID] = true
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				r, ok, err := f.s.ClaimRun(f.ctx, store.ClaimRunParams{Now: f.clock.Now()})
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				got[r.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != len(want) {
		t.Fatalf("claimed %d runs, want %d", len(got), len(want))
	}
	for id, n := range got {
		if n != 1 || !want[id] {
			t.Fatalf("run %s claimed %d times", id, n)
		}
	}
}

func testRunRecover(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	a := f.queueRun(pb, store.TriggerManual)
	f.queueRun(pb, store.TriggerManual)
	f.queueRun(pb, store.TriggerSchedule)
	running := f.claim() // a
	if running.ID != a.ID {
		t.Fatalf("claimed %s, want the oldest %s", running.ID, a.ID)
	}
	done := f.claim()
	if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: done.ID, Status: store.RunSucceeded, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	now := f.tick()
	rec, err := f.s.RecoverRuns(f.ctx, store.RecoverRunsParams{ErrorCode: "service_restarted", ErrorMessage: "restarted", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 2 {
		t.Fatalf("recovered %d runs, want the running and the queued one", len(rec))
	}
	for _, r := range rec {
		if r.Status != store.RunFailed || *r.ErrorCode != "service_restarted" || *r.ErrorMessage != "restarted" || !r.EndedAt.Equal(now) {
			t.Fatalf("recovered = %+v", r)
		}
	}
	left, err := f.s.ListRuns(f.ctx, store.ListRunsParams{Status: store.RunRunning})
	if err != nil || len(left) != 0 {
		t.Fatalf("running after recovery: %v, %v", left, err)
	}
	kept, err := f.s.GetRun(f.ctx, done.ID)
	if err != nil || kept.Status != store.RunSucceeded {
		t.Fatalf("a finished run changed: %+v, %v", kept, err)
	}
}

func runIDs(rs []store.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func testRunList(t *testing.T, f *fixture) {
	pa, pb := f.playbook("a"), f.playbook("b")
	// 20 runs, several created in the same instant: paging must use the id too.
	var all []store.Run
	for i := range 20 {
		if i%3 == 0 {
			f.tick()
		}
		p := pa
		trig := store.TriggerManual
		if i%2 == 1 {
			p, trig = pb, store.TriggerSchedule
		}
		r, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: p.ID, Trigger: trig, Now: f.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	// Newest first: by created_at, then id, descending.
	want := slices.Clone(all)
	slices.SortFunc(want, func(x, y store.Run) int {
		if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
			return c
		}
		switch {
		case x.ID > y.ID:
			return -1
		case x.ID < y.ID:
			return 1
		}
		return 0
	})
	var got []store.Run
	p := store.ListRunsParams{Limit: 7}
	for range 10 {
		page, err := f.s.ListRuns(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 7 {
			break
		}
		last := page[len(page)-1]
		p.BeforeCreated, p.BeforeID = &last.CreatedAt, last.ID
	}
	if !slices.Equal(runIDs(got), runIDs(want)) {
		t.Fatalf("paged runs skip or repeat:\n got %v\nwant %v", runIDs(got), runIDs(want))
	}
	count := func(p store.ListRunsParams) int {
		p.Limit = 100
		rs, err := f.s.ListRuns(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	since, until := all[6].CreatedAt, all[12].CreatedAt
	for name, tc := range map[string]struct {
		p    store.ListRunsParams
		want int
	}{
		"playbook": {store.ListRunsParams{PlaybookID: pb.ID}, 10},
		"trigger":  {store.ListRunsParams{Trigger: store.TriggerSchedule}, 10},
		"status":   {store.ListRunsParams{Status: store.RunQueued}, 20},
		"none":     {store.ListRunsParams{Status: store.RunFailed}, 0},
		"project":  {store.ListRunsParams{Project: "studio"}, 20},
		"window":   {store.ListRunsParams{Since: &since, Until: &until}, 6},
		"combined": {store.ListRunsParams{PlaybookID: pa.ID, Trigger: store.TriggerManual, Since: &since}, 7},
	} {
		if n := count(tc.p); n != tc.want {
			t.Errorf("%s: %d runs, want %d", name, n, tc.want)
		}
	}
}

func testRunRetry(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	f.queueRun(pb, store.TriggerManual)
	r := f.claim()
	_, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, Trigger: store.TriggerManual,
		RetryOf: &r.ID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict) // still running
	failed, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: store.RunFailed, ErrorCode: ptr("model_failure"),
		ErrorMessage: ptr("boom"), Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, Trigger: store.TriggerManual,
		RetryOf: &r.ID, ExpectedRetryOfVersion: failed.Version - 1, Now: f.tick()})
	wantVersionConflict(t, err, failed.Version-1, failed.Version)
	again, err := f.s.CreateRun(f.ctx, store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, Trigger: store.TriggerManual,
		RetryOf: &r.ID, ExpectedRetryOfVersion: failed.Version, Now: f.tick()})
	if err != nil || again.RetryOf == nil || *again.RetryOf != r.ID || again.Status != store.RunQueued {
		t.Fatalf("retry = %+v, %v", again, err)
	}
}

func testRunStats(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	start := f.clock.Now()
	durations := []time.Duration{3 * time.Second, 1 * time.Second, 10 * time.Second, 2 * time.Second}
	for i, d := range durations {
		f.queueRun(pb, store.TriggerManual)
		r := f.claim()
		f.clock.Advance(d)
		status := store.RunSucceeded
		if i == 0 {
			status = store.RunFailed
		}
		if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: r.ID, Status: status, Now: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	f.queueRun(pb, store.TriggerManual)
	st, err := f.s.RunStats(f.ctx, store.RunStatsParams{Since: start, Until: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 5 || st.Counts[store.RunSucceeded] != 3 || st.Counts[store.RunFailed] != 1 || st.Counts[store.RunQueued] != 1 ||
		st.Counts[store.RunCancelled] != 0 {
		t.Fatalf("stats = %+v", st)
	}
	// Durations 1, 2, 3, 10: the median is 2.5 s.
	if st.MedianDuration == nil || *st.MedianDuration != 2500*time.Millisecond {
		t.Fatalf("median = %v, want 2.5s", st.MedianDuration)
	}
	empty, err := f.s.RunStats(f.ctx, store.RunStatsParams{Since: f.tick(), Until: f.tick()})
	if err != nil || empty.Total != 0 || empty.MedianDuration != nil {
		t.Fatalf("empty window = %+v, %v", empty, err)
	}
}

// --- schedules ---------------------------------------------------------------

func (f *fixture) schedule(name string, pb store.Playbook, next *time.Time) store.Schedule {
	f.t.Helper()
	sc, err := f.s.CreateSchedule(f.ctx, store.CreateScheduleParams{ID: newID(), Project: "p", Name: name, Cron: "0 * * * *",
		PlaybookID: pb.ID, Input: "nightly", Args: map[string]string{"repo": "main"}, Enabled: next != nil, NextRunAt: next, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreateSchedule: %v", err)
	}
	return sc
}

func testScheduleCRUD(t *testing.T, f *fixture) {
	pb := f.playbook("audit")
	next := Epoch.Add(time.Hour)
	sc := f.schedule("hourly", pb, &next)
	got, err := f.s.GetScheduleByName(f.ctx, "hourly")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.Schedule{sc, got} {
		if s.Version != 1 || !s.Enabled || s.NextRunAt == nil || !s.NextRunAt.Equal(next) || s.PlaybookName != "audit" ||
			s.Args["repo"] != "main" || s.Cron != "0 * * * *" || s.LastRunAt != nil || s.SkippedRuns != 0 {
			t.Fatalf("schedule = %+v", s)
		}
	}
	paused := f.schedule("paused", pb, nil)
	if paused.Enabled || paused.NextRunAt != nil {
		t.Fatalf("paused schedule = %+v", paused)
	}
	_, err = f.s.CreateSchedule(f.ctx, store.CreateScheduleParams{ID: newID(), Project: "p", Name: "hourly", Cron: "* * * * *", PlaybookID: pb.ID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.CreateSchedule(f.ctx, store.CreateScheduleParams{ID: newID(), Project: "p", Name: "orphan", Cron: "* * * * *", PlaybookID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)

	off := false
	up, err := f.s.UpdateSchedule(f.ctx, store.UpdateScheduleParams{ID: sc.ID, ExpectedVersion: 1, Enabled: &off, SetNextRunAt: true, Now: f.tick()})
	if err != nil || up.Enabled || up.NextRunAt != nil || up.Version != 2 || up.Cron != "0 * * * *" {
		t.Fatalf("pause = %+v, %v", up, err)
	}
	_, err = f.s.UpdateSchedule(f.ctx, store.UpdateScheduleParams{ID: sc.ID, ExpectedVersion: 1, Cron: ptr("5 * * * *"), Now: f.tick()})
	wantVersionConflict(t, err, 1, 2)
	enabled, bad := true, newID()
	_, err = f.s.UpdateSchedule(f.ctx, store.UpdateScheduleParams{ID: sc.ID, PlaybookID: &bad, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	up, err = f.s.UpdateSchedule(f.ctx, store.UpdateScheduleParams{ID: sc.ID, ExpectedVersion: 2, Enabled: &enabled, Cron: ptr("5 * * * *"),
		SetNextRunAt: true, NextRunAt: &next, Now: f.tick()})
	if err != nil || !up.Enabled || up.Cron != "5 * * * *" || up.Version != 3 || !up.NextRunAt.Equal(next) {
		t.Fatalf("re-enable = %+v, %v", up, err)
	}
	list, err := f.s.ListSchedules(f.ctx, store.ListSchedulesParams{Enabled: &enabled})
	if err != nil || len(list) != 1 || list[0].ID != sc.ID {
		t.Fatalf("enabled schedules = %+v, %v", list, err)
	}
	_, err = f.s.DeleteSchedule(f.ctx, store.DeleteScheduleParams{ID: sc.ID, ExpectedVersion: 1})
	wantVersionConflict(t, err, 1, 3)
	if _, err := f.s.DeleteSchedule(f.ctx, store.DeleteScheduleParams{ID: sc.ID, ExpectedVersion: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = f.s.GetSchedule(f.ctx, sc.ID)
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.DeleteSchedule(f.ctx, store.DeleteScheduleParams{ID: sc.ID})
	wantCode(t, err, protocol.NotFound)
}

func fireParams(sc store.Schedule, pb store.Playbook, slot, next, now time.Time) store.FireScheduleParams {
	id := sc.ID
	return store.FireScheduleParams{ScheduleID: sc.ID, DueAt: *sc.NextRunAt, NextRunAt: next, LaunchedFor: slot, Now: now,
		Launch: &store.CreateRunParams{ID: newID(), PlaybookID: pb.ID, Input: sc.Input, Args: sc.Args,
			Trigger: store.TriggerSchedule, ScheduleID: &id, Now: now}}
}

func testScheduleFireOnce(t *testing.T, f *fixture) {
	pb := f.playbook("audit")
	slot := Epoch.Add(time.Hour)
	sc := f.schedule("hourly", pb, &slot)
	later := Epoch.Add(3 * time.Hour)
	f.schedule("later", pb, &later)
	f.schedule("paused", pb, nil)

	due, err := f.s.DueSchedules(f.ctx, store.DueSchedulesParams{Now: slot.Add(-time.Second)})
	if err != nil || len(due) != 0 {
		t.Fatalf("due before the slot = %+v, %v", due, err)
	}
	due, err = f.s.DueSchedules(f.ctx, store.DueSchedulesParams{Now: slot})
	if err != nil || len(due) != 1 || due[0].ID != sc.ID {
		t.Fatalf("due at the slot = %+v, %v", due, err)
	}
	now := slot.Add(5 * time.Second)
	next := slot.Add(time.Hour)
	res, err := f.s.FireSchedule(f.ctx, fireParams(due[0], pb, slot, next, now))
	if err != nil {
		t.Fatal(err)
	}
	if res.Run == nil || res.Run.Trigger != store.TriggerSchedule || *res.Run.ScheduleID != sc.ID || res.Run.Input != "nightly" {
		t.Fatalf("launched = %+v", res.Run)
	}
	if !res.Schedule.NextRunAt.Equal(next) || !res.Schedule.LastRunAt.Equal(slot) || *res.Schedule.LastRunID != res.Run.ID ||
		res.Schedule.Version != 1 {
		t.Fatalf("schedule after firing = %+v (bookkeeping must not bump the version)", res.Schedule)
	}
	// The same slot again: already handled.
	_, err = f.s.FireSchedule(f.ctx, fireParams(due[0], pb, slot, next, now))
	wantCode(t, err, protocol.Conflict)
	runs, err := f.s.ListRuns(f.ctx, store.ListRunsParams{ScheduleID: sc.ID})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of the schedule = %d, %v; want 1", len(runs), err)
	}
	due, err = f.s.DueSchedules(f.ctx, store.DueSchedulesParams{Now: now})
	if err != nil || len(due) != 0 {
		t.Fatalf("due after firing = %+v, %v", due, err)
	}
}

func testScheduleFireConcurrent(t *testing.T, f *fixture) {
	pb := f.playbook("audit")
	slot := Epoch.Add(time.Hour)
	sc := f.schedule("hourly", pb, &slot)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := f.s.FireSchedule(f.ctx, fireParams(sc, pb, slot, slot.Add(time.Hour), slot))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case protocol.IsCode(err, protocol.Conflict):
				conflicts++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	runs, err := f.s.ListRuns(f.ctx, store.ListRunsParams{ScheduleID: sc.ID})
	if wins != 1 || conflicts != 7 || err != nil || len(runs) != 1 {
		t.Fatalf("%d firings won, %d conflicted, %d runs (%v); want exactly one", wins, conflicts, len(runs), err)
	}
}

func testScheduleSkips(t *testing.T, f *fixture) {
	pb := f.playbook("audit")
	slot := Epoch.Add(time.Hour)
	sc := f.schedule("hourly", pb, &slot)
	now := slot.Add(3*time.Hour + 30*time.Minute)
	id := sc.ID
	p := store.FireScheduleParams{ScheduleID: sc.ID, DueAt: slot, NextRunAt: slot.Add(4 * time.Hour), Now: now,
		Skipped: 4, SkippedFrom: slot, SkippedTo: slot.Add(3 * time.Hour),
		SkipEvent: &store.AppendAdminEventParams{Actor: "studio_scheduler", Action: "studio.schedule.skipped", TargetID: &id,
			Details: []byte(`{"skipped":4}`), Now: now}}
	res, err := f.s.FireSchedule(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Run != nil || res.Schedule.SkippedRuns != 4 || !res.Schedule.LastSkippedAt.Equal(slot.Add(3*time.Hour)) ||
		res.Schedule.LastRunAt != nil || !res.Schedule.NextRunAt.Equal(slot.Add(4*time.Hour)) {
		t.Fatalf("schedule after skipping = %+v", res.Schedule)
	}
	es := f.events("studio.schedule.skipped")
	if len(es) != 1 || *es[0].TargetID != sc.ID {
		t.Fatalf("skip events = %+v", es)
	}
	// Launch one slot and skip the one before it, together.
	p2 := fireParams(res.Schedule, pb, slot.Add(5*time.Hour), slot.Add(6*time.Hour), slot.Add(5*time.Hour))
	p2.Skipped, p2.SkippedFrom, p2.SkippedTo = 1, slot.Add(4*time.Hour), slot.Add(4*time.Hour)
	res, err = f.s.FireSchedule(f.ctx, p2)
	if err != nil || res.Run == nil || res.Schedule.SkippedRuns != 5 {
		t.Fatalf("launch and skip = %+v, %v", res, err)
	}
}

// --- retention and diagnostics ----------------------------------------------

func testPurgeFrames(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.append(c.ID, tr.RequestID, text("one"), text("two"), text("three"))
	_, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 3, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)              // a turn is active
	f.finish(tr.RequestID, store.TurnCompleted, nil) // frames 1..5, done = 5
	_, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 7, Now: f.tick()})
	wantCode(t, err, protocol.Validation) // beyond the next sequence (6)
	_, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: newID(), BeforeSequence: 1, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)

	signal := f.s.FrameSignal(c.ID)
	res, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 3, Now: f.tick(),
		Audit: auditRow(f, c.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Purged != 2 || res.RetainedFrom != 3 {
		t.Fatalf("purge = %+v, want 2 purged, retained from 3", res)
	}
	waitClosed(t, signal, "purge")
	if got := f.get(c.ID); got.RetainedFrom != 3 || got.LastSequence() != 5 {
		t.Fatalf("conversation after purge: retained %d, last %d", got.RetainedFrom, got.LastSequence())
	}
	frames := f.frames(c.ID)
	if len(frames) != 3 || frames[0].Sequence != 3 {
		t.Fatalf("frames after purge start at %v", frames)
	}
	// An older cut is a no-op; the retained point never moves back.
	res, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 2, Now: f.tick()})
	if err != nil || res.Purged != 0 || res.RetainedFrom != 3 {
		t.Fatalf("older purge = %+v, %v", res, err)
	}
	// Purging everything leaves the sequence where it was.
	res, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 6, Now: f.tick()})
	if err != nil || res.Purged != 3 || res.RetainedFrom != 6 || len(f.frames(c.ID)) != 0 || f.get(c.ID).NextSequence != 6 {
		t.Fatalf("full purge = %+v, %v", res, err)
	}
	if n := len(f.events("studio.app.command")); n != 1 {
		t.Fatalf("audit rows = %d, want 1", n)
	}
}

func testPurgeDeleted(t *testing.T, f *fixture) {
	mk := func() store.Conversation {
		c, tr := f.running()
		f.append(c.ID, tr.RequestID, text("hello"))
		f.finish(tr.RequestID, store.TurnCompleted, nil)
		if err := f.s.CreateStreamTicket(f.ctx, store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: c.ID,
			ExpiresAt: f.clock.Now().Add(time.Minute), Now: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	old, recent, kept := mk(), mk(), mk()
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: old.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	cutoff := f.clock.Advance(time.Hour)
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: recent.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := len(f.events(""))
	res, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: cutoff,
		Audit: auditRow(f, "")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conversations != 1 || res.Turns != 1 || res.Frames != 3 || res.Tickets != 1 {
		t.Fatalf("purged %+v, want the old conversation's 1 turn, 3 frames, 1 ticket", res)
	}
	_, err = f.s.GetConversation(f.ctx, old.ID)
	wantCode(t, err, protocol.NotFound)
	for _, id := range []string{recent.ID, kept.ID} {
		if len(f.frames(id)) != 3 {
			t.Fatalf("conversation %s lost frames", id)
		}
	}
	if after := len(f.events("")); after != before+1 {
		t.Fatalf("admin events %d -> %d; the audit trail must keep every row and gain one", before, after)
	}
	again, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: cutoff})
	if err != nil || again.Conversations != 0 {
		t.Fatalf("second purge = %+v, %v", again, err)
	}
}

func testDiagnostics(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	f.queueRun(pb, store.TriggerManual)
	f.queueRun(pb, store.TriggerManual)
	f.claim()
	f.running()
	c := f.conversation()
	f.submit(c.ID)
	next := Epoch.Add(time.Hour)
	f.schedule("on", pb, &next)
	f.schedule("off", pb, nil)
	d, err := f.s.Diagnostics(f.ctx, store.DiagnosticsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if d.RunsQueued != 1 || d.RunsRunning != 1 || d.TurnsRunning != 1 || d.TurnsQueued != 1 || d.EnabledSchedules != 1 ||
		d.ExecutingProposalsTotal != 0 || len(d.ExecutingProposals) != 0 {
		t.Fatalf("diagnostics = %+v", d)
	}
}
