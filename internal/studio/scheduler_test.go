package studio_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// The fake clock starts at storetest.Epoch, 12:00:00 UTC on 9 July 2026.
func at(hour, min, sec int) time.Time {
	return time.Date(2026, time.July, 9, hour, min, sec, 0, time.UTC)
}

// schedFx has the playbook "audit-repo" and the hourly schedule "hourly".
func schedFx(t *testing.T) *fx {
	t.Helper()
	f := newFx(t, fxOpts{})
	f.exec(studio.CreatePlaybookCommand{Name: "audit-repo", Prompt: "Audit {{repo}}", Args: []studio.PlaybookArg{{Name: "repo", Required: true}}})
	sc := f.exec(studio.CreateScheduleCommand{Name: "hourly", Cron: "0 * * * *", Playbook: "audit-repo", Input: "nightly",
		Args: map[string]string{"repo": "main"}}).Schedule
	if want := protocol.Timestamp(at(13, 0, 0)); sc.NextRunAt == nil || *sc.NextRunAt != want {
		t.Fatalf("next run = %v, want 13:00", sc.NextRunAt)
	}
	return f
}

func (f *fx) tick(svc *studio.Service) studio.TickResult {
	f.t.Helper()
	res, err := svc.Tick(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *fx) scheduledRuns() []studio.Run {
	f.t.Helper()
	page, err := f.svc.ListRuns(f.ctx, studio.RunQuery{Trigger: "schedule", Limit: 200})
	if err != nil {
		f.t.Fatal(err)
	}
	return page.Runs
}

func TestSchedulerLaunchesDueOnce(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	f.clock.Set(at(12, 59, 59))
	if res := f.tick(f.svc); len(res.Launched) != 0 {
		t.Fatalf("launched before the slot: %+v", res.Launched)
	}
	f.clock.Set(at(13, 0, 5))
	res := f.tick(f.svc)
	if len(res.Launched) != 1 || res.Skipped != 0 {
		t.Fatalf("tick at 13:00:05 = %+v", res)
	}
	r := res.Launched[0]
	if r.Trigger != "schedule" || r.Input != "nightly" || r.Args["repo"] != "main" || r.Status != "queued" || r.ScheduleID == nil {
		t.Fatalf("launched run = %+v", r)
	}
	if res := f.tick(f.svc); len(res.Launched) != 0 {
		t.Fatalf("the same slot launched twice: %+v", res)
	}
	sc, err := f.svc.GetSchedule(f.ctx, "hourly")
	if err != nil || *sc.NextRunAt != protocol.Timestamp(at(14, 0, 0)) || *sc.LastRunAt != protocol.Timestamp(at(13, 0, 0)) ||
		*sc.LastRunID != r.ID || sc.Version != 1 {
		t.Fatalf("schedule = %+v, %v", sc, err)
	}
	f.clock.Set(at(14, 0, 30))
	if res := f.tick(f.svc); len(res.Launched) != 1 {
		t.Fatalf("14:00 = %+v", res)
	}
	if n := len(f.scheduledRuns()); n != 2 {
		t.Fatalf("%d scheduled runs, want 2", n)
	}
}

// TestSchedulersRace: two services over one store and a third over a second
// handle on the same file (another process) tick at once, many times: each
// slot launches exactly once.
func TestSchedulersRace(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	other := openStore(t, f.path)
	svcs := []*studio.Service{f.svc, f.service(f.st, fxOpts{}), f.service(other, fxOpts{})}
	for hour := 13; hour <= 16; hour++ {
		f.clock.Set(at(hour, 0, 1))
		var wg sync.WaitGroup
		var mu sync.Mutex
		launched := 0
		for _, svc := range svcs {
			for range 3 {
				wg.Go(func() {
					res, err := svc.Tick(f.ctx)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					launched += len(res.Launched)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		if launched != 1 {
			t.Fatalf("slot %02d:00 launched %d times", hour, launched)
		}
	}
	if n := len(f.scheduledRuns()); n != 4 {
		t.Fatalf("%d scheduled runs for 4 slots", n)
	}
}

// TestSchedulerRestart: a restarted daemon does not launch a slot the
// previous process launched.
func TestSchedulerRestart(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	f.clock.Set(at(13, 0, 2))
	if res := f.tick(f.svc); len(res.Launched) != 1 {
		t.Fatalf("first process = %+v", res)
	}
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, f.path)
	svc := f.service(st, fxOpts{})
	if err := svc.Start(f.ctx); err != nil { // fails the queued run: the "process" died
		t.Fatal(err)
	}
	res, err := svc.Tick(f.ctx)
	if err != nil || len(res.Launched) != 0 {
		t.Fatalf("after restart = %+v, %v", res, err)
	}
}

func skipEvents(t *testing.T, f *fx) []studio.AuditEvent {
	t.Helper()
	page, err := f.svc.ListAudit(f.ctx, studio.AuditQuery{Action: studio.ActionScheduleSkipped})
	if err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// TestSchedulerSkipsMissed: slots that passed while the daemon was down are
// skipped, counted on the schedule and recorded in the audit trail.
func TestSchedulerSkipsMissed(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	f.clock.Set(at(16, 30, 0)) // 13, 14, 15 and 16 o'clock were missed
	res := f.tick(f.svc)
	if len(res.Launched) != 0 || res.Skipped != 4 {
		t.Fatalf("tick = %+v, want nothing launched and 4 skipped", res)
	}
	sc, err := f.svc.GetSchedule(f.ctx, "hourly")
	if err != nil || sc.SkippedRuns != 4 || *sc.LastSkippedAt != protocol.Timestamp(at(16, 0, 0)) ||
		*sc.NextRunAt != protocol.Timestamp(at(17, 0, 0)) || sc.LastRunAt != nil {
		t.Fatalf("schedule = %+v, %v", sc, err)
	}
	evs := skipEvents(t, f)
	if len(evs) != 1 || evs[0].Actor != studio.ActorScheduler || *evs[0].TargetID != sc.ID {
		t.Fatalf("skip events = %+v", evs)
	}
	var d struct {
		Skipped int64  `json:"skipped"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(evs[0].Details, &d); err != nil || d.Skipped != 4 || d.Reason == "" {
		t.Fatalf("skip details = %s (%v)", evs[0].Details, err)
	}
	if res := f.tick(f.svc); res.Skipped != 0 || len(res.Launched) != 0 {
		t.Fatalf("second tick = %+v", res)
	}
	f.clock.Set(at(17, 0, 10))
	if res := f.tick(f.svc); len(res.Launched) != 1 || res.Skipped != 0 {
		t.Fatalf("17:00 = %+v", res)
	}
}

// TestSchedulerLaunchesLatestSlot: back within the grace of the latest slot,
// the older missed slots are skipped and the latest one runs.
func TestSchedulerLaunchesLatestSlot(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	f.clock.Set(at(16, 0, 20))
	res := f.tick(f.svc)
	if len(res.Launched) != 1 || res.Skipped != 3 {
		t.Fatalf("tick = %+v, want 16:00 launched and 13–15 skipped", res)
	}
	sc, _ := f.svc.GetSchedule(f.ctx, "hourly")
	if sc.SkippedRuns != 3 || *sc.LastRunAt != protocol.Timestamp(at(16, 0, 0)) || *sc.LastSkippedAt != protocol.Timestamp(at(15, 0, 0)) {
		t.Fatalf("schedule = %+v", sc)
	}
}

// TestSchedulerPausedIsNotMissed: slots while a schedule is paused are not
// missed runs.
func TestSchedulerPausedIsNotMissed(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	f.exec(studio.SetScheduleEnabledCommand{Schedule: "hourly", Enabled: ptr(false)})
	f.clock.Set(at(18, 30, 0))
	if res := f.tick(f.svc); len(res.Launched) != 0 || res.Skipped != 0 {
		t.Fatalf("paused tick = %+v", res)
	}
	sc := f.exec(studio.SetScheduleEnabledCommand{Schedule: "hourly", Enabled: ptr(true)}).Schedule
	if *sc.NextRunAt != protocol.Timestamp(at(19, 0, 0)) {
		t.Fatalf("next run after resuming = %v", *sc.NextRunAt)
	}
	if res := f.tick(f.svc); len(res.Launched) != 0 || res.Skipped != 0 || len(skipEvents(t, f)) != 0 {
		t.Fatalf("after resuming = %+v", res)
	}
}

// TestSchedulerArgsNoLongerMatch: a slot whose arguments the playbook no
// longer accepts is skipped with the reason, not launched.
func TestSchedulerArgsNoLongerMatch(t *testing.T) {
	t.Parallel()
	f := schedFx(t)
	f.exec(studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: 1, Args: &[]studio.PlaybookArg{{Name: "branch", Required: true}}})
	f.clock.Set(at(13, 0, 1))
	res := f.tick(f.svc)
	if len(res.Launched) != 0 || res.Skipped != 1 {
		t.Fatalf("tick = %+v", res)
	}
	if evs := skipEvents(t, f); len(evs) != 1 {
		t.Fatalf("skip events = %+v", evs)
	}
}

// TestSchedulerLoop: with an interval, the started service launches due
// schedules by itself, and the run executes.
func TestSchedulerLoop(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{cfg: func(c *studio.Config) { c.SchedulerInterval = 5 * time.Millisecond }})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	f.exec(studio.CreateScheduleCommand{Name: "minutely", Cron: "* * * * *", Playbook: "p"})
	f.clock.Set(storetest.Epoch.Add(time.Minute + time.Second))
	f.start()
	var runs []studio.Run
	testutil.Eventually(t, func() bool { runs = f.scheduledRuns(); return len(runs) == 1 }, "the scheduler loop to launch a run")
	if r := f.waitRun(runs[0].ID, studio.RunEnded); r.Status != "succeeded" {
		t.Fatalf("scheduled run = %+v", r)
	}
}

func TestCronPreview(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	p, err := f.svc.CronPreview(" 30  2 * * 1-5 ", 3)
	if err != nil {
		t.Fatal(err)
	}
	// 9 July 2026 is a Thursday: Friday 10th, Monday 13th, Tuesday 14th at 02:30.
	want := []float64{
		protocol.Timestamp(time.Date(2026, 7, 10, 2, 30, 0, 0, time.UTC)),
		protocol.Timestamp(time.Date(2026, 7, 13, 2, 30, 0, 0, time.UTC)),
		protocol.Timestamp(time.Date(2026, 7, 14, 2, 30, 0, 0, time.UTC)),
	}
	if p.Cron != "30 2 * * 1-5" || len(p.Next) != 3 || p.Next[0] != want[0] || p.Next[1] != want[1] || p.Next[2] != want[2] {
		t.Fatalf("preview = %+v", p)
	}
	for _, bad := range []string{"", "* * * *", "* * * * * *", "@daily", "60 * * * *", "0 0 30 2 *", "TZ=UTC 0 * * * *"} {
		if _, err := f.svc.CronPreview(bad, 5); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("cron %q: err = %v, want validation", bad, err)
		}
	}
	if _, err := f.svc.CronPreview("* * * * *", 21); !protocol.IsCode(err, protocol.Validation) {
		t.Fatalf("count 21: %v", err)
	}
	if p, err := f.svc.CronPreview("* * * * *", 0); err != nil || len(p.Next) != 5 {
		t.Fatalf("default count = %+v, %v", p, err)
	}
}
