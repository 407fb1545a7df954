package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

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
