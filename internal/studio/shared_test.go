package studio_test

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Several daemons on one database (studio.Config.Shared), in one process:
// services on one store, as daemons on one PostgreSQL share theirs.

func shared(instance string) func(*studio.Config) {
	return func(c *studio.Config) { c.Shared, c.Instance, c.ClaimInterval = true, instance, 20*time.Millisecond }
}

var slowRun = script.Script{Turns: []script.Turn{{Steps: []script.Step{sleepStep(600_000), textStep("never")}}}}

// TestSharedRunCancelReachesExecutor: a cancel recorded through another
// daemon stops the model call of the daemon that executes the run.
func TestSharedRunCancelReachesExecutor(t *testing.T) {
	t.Parallel()
	f := runFx(t, slowRun, shared("a"))
	other := f.service(f.st, fxOpts{script: &slowRun, cfg: shared("b")}) // not started: it executes nothing
	r := f.launch("slow")
	running := f.waitRun(r.ID, isStatus("running"))
	if running.Status != "running" {
		t.Fatal(running)
	}
	if _, err := other.Execute(f.ctx, studio.CancelRunCommand{Run: r.ID}, studio.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if done := f.waitRun(r.ID, studio.RunEnded); done.Status != "cancelled" {
		t.Fatalf("run = %+v", done)
	}
}

// TestSharedStartLeavesOthersRuns: a starting daemon that shares its
// database fails no run of another daemon; a run whose daemon's lease
// expired is failed by the reaper, with the reason, once.
func TestSharedStartLeavesOthersRuns(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{cfg: shared("a")})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	var ids []string
	for range 2 {
		ids = append(ids, f.exec(studio.LaunchPlaybookCommand{Playbook: "p"}).Run.ID)
	}
	now := f.clock.Now()
	if _, err := f.st.RegisterInstance(f.ctx, store.RegisterInstanceParams{Instance: store.Instance{ID: "dead", StartedAt: now,
		HeartbeatAt: now, LeaseExpiresAt: now.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"live", "dead"} {
		if _, ok, err := f.st.ClaimRun(f.ctx, store.ClaimRunParams{Now: now, Instance: owner}); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	f.start()
	for _, id := range ids {
		if r := f.getRun(id); r.Status != "running" {
			t.Fatalf("run %s is %s after a daemon started", id, r.Status)
		}
	}
	if _, err := f.st.ReapInstances(f.ctx, store.ReapInstancesParams{Now: now.Add(time.Minute), Except: "a"}); err != nil {
		t.Fatal(err)
	}
	w, err := f.st.OrphanedWork(f.ctx, store.OrphanedWorkParams{})
	if err != nil || len(w.Runs) != 1 || w.Runs[0].Owner != "dead" {
		t.Fatalf("orphaned runs %+v, %v", w.Runs, err)
	}
	for range 2 { // a second reaper finds it failed already
		if err := f.svc.ReapOrphans(f.ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	dead := f.getRun(w.Runs[0].ID)
	if dead.Status != "failed" || dead.Error == nil || dead.Error.Code != "service_restarted" || dead.Error.Message == "" || dead.Version != 3 {
		t.Fatalf("the dead daemon's run = %+v", dead)
	}
	for _, id := range ids {
		if id != dead.ID {
			if r := f.getRun(id); r.Status != "running" {
				t.Fatalf("the live daemon's run is %s", r.Status)
			}
		}
	}
}

func (f *fx) getRun(id string) studio.Run {
	f.t.Helper()
	r, err := f.svc.GetRun(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}
