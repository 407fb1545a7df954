package storetest

import (
	"testing"

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
	run("Workflow/LaunchAndDelete", testWorkflowLaunchDelete)

	run("Run/Lifecycle", testRunLifecycle)
	run("Run/PinsPlaybookVersion", testRunPinsVersion)
	run("Run/Cancel", testRunCancel)
	run("Run/ClaimConcurrent", testRunClaimConcurrent)
	run("Run/Recover", testRunRecover)
	run("Run/ListFiltersPaging", testRunList)
	run("Run/Retry", testRunRetry)
	run("Run/Stats", testRunStats)
	run("Run/SearchAndFilteredStats", testRunSearch)
	run("Run/SaveOutput", testRunSaveOutput)
	run("Run/Activity", testRunActivity)
	run("Run/Workflow", testRunWorkflow)
	run("Audit/Filters", testAuditFilters)

	run("Schedule/CreateGetUpdateDelete", testScheduleCRUD)
	run("Schedule/DueAndFireOnce", testScheduleFireOnce)
	run("Schedule/FireConcurrent", testScheduleFireConcurrent)
	run("Schedule/FireSkips", testScheduleSkips)

	run("Retention/PurgeFrames", testPurgeFrames)
	run("Retention/PurgeDeletedConversations", testPurgeDeleted)
	run("Retention/PurgeIdleConversations", testPurgeIdle)
	run("Diagnostics", testDiagnostics)
	run("Changes/LoggedInCommitOrder", testAppChanges)
	run("Changes/ConcurrentWritersInOrder", testAppChangesConcurrent)
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
