package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

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
