package studio_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

func TestDoctor(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	f.exec(studio.LaunchPlaybookCommand{Playbook: "p"})
	f.exec(studio.CreateScheduleCommand{Name: "s", Cron: "0 * * * *", Playbook: "p"})
	r, err := f.svc.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != studio.StatusOK || len(r.Problems) != 0 {
		t.Fatalf("status %s, problems %v", r.Status, r.Problems)
	}
	db := r.Database
	if db.File != "studio.db" || db.SchemaVersion < 2 || db.QuickCheck != "ok" || db.SizeBytes == nil || *db.SizeBytes <= 0 ||
		db.WALBytes == nil || db.FreeBytes == nil || *db.FreeBytes <= 0 {
		t.Fatalf("database = %+v", db)
	}
	if r.Model.Provider != "script" || !r.Model.Configured || r.Runs.Queued != 1 || r.Runs.Running != 0 || r.Schedules.Enabled != 1 {
		t.Fatalf("report = %+v", r)
	}
	// No host path anywhere in the projection.
	b, err := protocol.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if dir := strings.TrimSuffix(f.path, "/studio.db"); strings.Contains(string(b), dir) || strings.Contains(string(b), "/") {
		t.Fatalf("the report names a path: %s", b)
	}
}

func TestDoctorReportsProblems(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{noModel: true})
	// An operator turn in flight and a proposal left executing.
	conv, req, prop := uuid.NewString(), uuid.NewString(), uuid.NewString()
	now := f.clock.Now()
	if _, err := f.st.CreateConversation(f.ctx, store.CreateConversationParams{ID: conv, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.SubmitTurn(f.ctx, store.SubmitTurnParams{ConversationID: conv, RequestID: req, Instruction: "x",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rawDB().ExecContext(f.ctx, `INSERT INTO studio_operator_proposals
		(id, conversation_id, request_id, command_type, command_json, risk, summary, idempotency_key, status, expires_at, created_at, confirmed_at,
		 command_hash, call_id)
		VALUES (?, ?, ?, 'launch_playbook', '{}', 'execute', 'Launch playbook "audit-repo"', ?, 'executing', ?, ?, ?, 'h', 'call_1')`,
		prop, conv, req, uuid.NewString(), protocol.Timestamp(now)+600, protocol.Timestamp(now), protocol.Timestamp(now)); err != nil {
		t.Fatal(err)
	}
	r, err := f.svc.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != studio.StatusDegraded || r.Model.Configured || r.Model.Provider != "" {
		t.Fatalf("report = %+v", r)
	}
	op := r.Operator
	if op.TurnsQueued != 1 || op.IndeterminateTotal != 1 || len(op.IndeterminateProposals) != 1 ||
		op.IndeterminateProposals[0].ID != prop || op.IndeterminateProposals[0].CommandType != "launch_playbook" {
		t.Fatalf("operator = %+v", op)
	}
	if len(r.Problems) != 2 {
		t.Fatalf("problems = %v, want the missing model and the indeterminate proposal", r.Problems)
	}
}

// checkingProvider is a model that can report its own health.
type checkingProvider struct {
	model.Provider
	check func(context.Context) error
}

func (p checkingProvider) Check(ctx context.Context) error { return p.check(ctx) }

func TestDoctorModelCheck(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{provider: checkingProvider{Provider: mustScript(t), check: func(context.Context) error {
		return errors.New("dial tcp 127.0.0.1:11434: connection refused reading /home/someone/.config/key")
	}}})
	r, err := f.svc.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != studio.StatusDegraded || r.Model.Healthy == nil || *r.Model.Healthy || strings.Contains(r.Model.Error, "/home") ||
		!strings.Contains(r.Model.Error, redact.Path) {
		t.Fatalf("model = %+v", r.Model)
	}
}

// TestDoctorWork: the work part counts what is in flight and calls no
// model and checks no database (a model that cannot answer is not asked).
func TestDoctorWork(t *testing.T) {
	t.Parallel()
	asked := false
	f := newFx(t, fxOpts{provider: checkingProvider{Provider: mustScript(t), check: func(context.Context) error { asked = true; return errors.New("down") }}})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	f.exec(studio.LaunchPlaybookCommand{Playbook: "p"})
	f.exec(studio.CreateScheduleCommand{Name: "s", Cron: "0 * * * *", Playbook: "p"})
	r, err := f.svc.DoctorWork(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if asked || r.Status != studio.StatusOK || r.Runs.Queued != 1 || r.Schedules.Enabled != 1 || r.Database.QuickCheck != "" || r.Model.Healthy != nil {
		t.Fatalf("work report %+v (model asked: %v)", r, asked)
	}
}

func mustScript(t *testing.T) model.Provider {
	t.Helper()
	p, err := script.New(script.Script{Turns: []script.Turn{{Steps: []script.Step{textStep("ok")}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMaintenanceActions(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	for _, action := range []string{"vacuum", "checkpoint", "integrity_check"} {
		res := f.exec(studio.RunMaintenanceCommand{Action: action})
		m := res.Maintenance
		if m == nil || m.Action != action || (action != "checkpoint" && !m.OK) || m.DatabaseBytes == nil || len(m.Problems) != 0 || res.Target != nil {
			t.Fatalf("%s = %+v", action, m)
		}
	}
	page, err := f.svc.ListAudit(f.ctx, studio.AuditQuery{Action: studio.ActionCommand})
	if err != nil || len(page.Events) != 3 {
		t.Fatalf("maintenance audit rows = %+v, %v", page.Events, err)
	}
	// Without its audit row, maintenance does not run.
	f.breakAudit()
	_, err = f.svc.Execute(f.ctx, studio.RunMaintenanceCommand{Action: "vacuum"}, studio.ExecOptions{})
	wantCode(t, err, protocol.AuditUnavailable)
}

// TestPurgeDeletedConversations: only conversations deleted longer ago than
// the recovery window go.
func TestPurgeDeletedConversations(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{cfg: func(c *studio.Config) { c.RecoveryWindow = 48 * time.Hour }})
	id := uuid.NewString()
	if _, err := f.st.CreateConversation(f.ctx, store.CreateConversationParams{ID: id, Now: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: id, Now: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	purge := studio.RunMaintenanceCommand{Action: "purge_deleted_conversations"}
	f.clock.Advance(47 * time.Hour)
	if m := f.exec(purge).Maintenance; m.Removed.Conversations != 0 {
		t.Fatalf("purged inside the recovery window: %+v", m.Removed)
	}
	f.clock.Advance(2 * time.Hour)
	if m := f.exec(purge).Maintenance; m.Removed.Conversations != 1 || *m.DeletedBefore != protocol.Timestamp(f.clock.Now().Add(-48*time.Hour)) {
		t.Fatalf("purge after the window = %+v", m)
	}
	if _, err := f.st.GetConversation(f.ctx, id); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("conversation still there: %v", err)
	}
}

func TestSeed(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	created, err := f.svc.Seed(f.ctx)
	if err != nil || !created {
		t.Fatalf("Seed = %v, %v", created, err)
	}
	pbs, err := f.svc.ListPlaybooks(f.ctx, studio.PlaybookQuery{})
	if err != nil || len(pbs.Playbooks) != 3 {
		t.Fatalf("playbooks = %+v, %v", pbs, err)
	}
	for _, name := range []string{"audit-repo", "summarize-failed-runs", "write-release-notes"} {
		p, err := f.svc.GetPlaybook(f.ctx, name)
		if err != nil || len(p.Args) == 0 {
			t.Fatalf("%s = %+v, %v", name, p, err)
		}
	}
	sc, err := f.svc.GetSchedule(f.ctx, "nightly-audit")
	if err != nil || sc.Enabled || sc.NextRunAt != nil {
		t.Fatalf("starter schedule = %+v, %v", sc, err)
	}
	// Once per database: deleting the starters does not bring them back.
	f.exec(studio.DeleteScheduleCommand{Schedule: "nightly-audit"})
	f.exec(studio.DeletePlaybookCommand{Playbook: "write-release-notes"})
	if created, err := f.svc.Seed(f.ctx); err != nil || created {
		t.Fatalf("second Seed = %v, %v", created, err)
	}
	// A database that already has the user's playbooks gets no starters.
	g := newFx(t, fxOpts{})
	g.exec(studio.CreatePlaybookCommand{Name: "mine", Prompt: "p"})
	if created, err := g.svc.Seed(g.ctx); err != nil || created {
		t.Fatalf("Seed over user content = %v, %v", created, err)
	}
	if _, err := g.svc.GetPlaybook(g.ctx, "audit-repo"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("starter added over user content: %v", err)
	}
}

// TestStarterContentIsValid: every starter command passes its own checks.
func TestStarterContentIsValid(t *testing.T) {
	t.Parallel()
	for _, c := range studio.StarterPlaybooks {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	for _, c := range studio.StarterSchedules {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}

func TestQueriesPaging(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	for range 25 {
		f.exec(studio.LaunchPlaybookCommand{Playbook: "p"}) // all at the same instant
	}
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		page, err := f.svc.ListRuns(f.ctx, studio.RunQuery{Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page.Runs {
			if seen[r.ID] {
				t.Fatalf("run %s repeated", r.ID)
			}
			seen[r.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 25 || pages != 4 {
		t.Fatalf("%d runs in %d pages", len(seen), pages)
	}
	// A cursor of another list is refused.
	runs, err := f.svc.ListRuns(f.ctx, studio.RunQuery{Limit: 1})
	check(t, err)
	_, err = f.svc.ListPlaybooks(f.ctx, studio.PlaybookQuery{Cursor: runs.NextCursor})
	wantCode(t, err, protocol.Validation)
	_, err = f.svc.ListRuns(f.ctx, studio.RunQuery{Cursor: "!!"})
	wantCode(t, err, protocol.Validation)
	_, err = f.svc.ListRuns(f.ctx, studio.RunQuery{Status: "exploded"})
	wantCode(t, err, protocol.Validation)
	_, err = f.svc.ListRuns(f.ctx, studio.RunQuery{Limit: 500})
	wantCode(t, err, protocol.Validation)
	// By playbook name, and a name nobody has.
	if page, err := f.svc.ListRuns(f.ctx, studio.RunQuery{Playbook: "p", Limit: 100}); err != nil || len(page.Runs) != 25 {
		t.Fatalf("by name: %d, %v", len(page.Runs), err)
	}
	if page, err := f.svc.ListRuns(f.ctx, studio.RunQuery{Playbook: "other"}); err != nil || len(page.Runs) != 0 {
		t.Fatalf("unknown name: %+v, %v", page, err)
	}
	st, err := f.svc.RunStats(f.ctx, "7d")
	if err != nil || st.Total != 25 || st.Counts["queued"] != 25 || st.MedianDurationMs != nil {
		t.Fatalf("stats = %+v, %v", st, err)
	}
	_, err = f.svc.RunStats(f.ctx, "1y")
	wantCode(t, err, protocol.Validation)
}
