package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/studio/operator/internal/store"
)

// changesAfter lists every logged application change after a cursor.
func (f *fixture) changesAfter(after int64) []store.AppChange {
	f.t.Helper()
	cs, err := f.s.ListAppChanges(f.ctx, after, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func changeList(cs []store.AppChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type+" "+c.ResourceID)
	}
	return out
}

// testAppChanges: every write of a run, schedule, playbook or workflow
// logs its change in its own transaction, numbered from 1 without gaps; a
// refused write logs nothing; a cursor lists what came after it.
func testAppChanges(t *testing.T, f *fixture) {
	if lo, hi, err := f.s.AppChangesRange(f.ctx); err != nil || hi != 0 || lo > 1 {
		t.Fatalf("a fresh store's range: %d..%d %v", lo, hi, err)
	}
	pb := f.playbook("audit")
	r := f.queueRun(pb, store.TriggerManual)
	mark := f.changesAfter(0)
	claimed := f.claim()
	if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: claimed.ID, Status: store.RunSucceeded, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	// Refused: the run already ended; nothing is logged.
	if _, err := f.s.FinishRun(f.ctx, store.FinishRunParams{ID: claimed.ID, Status: store.RunFailed, Now: f.tick()}); err == nil {
		t.Fatal("finishing a finished run succeeded")
	}
	all := f.changesAfter(0)
	want := []string{"playbook.changed " + pb.ID, "run.created " + r.ID, "run.changed " + r.ID, "run.changed " + r.ID}
	if got := changeList(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for i, c := range all {
		if c.Seq != int64(i+1) {
			t.Fatalf("change %d has seq %d", i, c.Seq)
		}
	}
	if got := changeList(f.changesAfter(mark[len(mark)-1].Seq)); fmt.Sprint(got) != fmt.Sprint(want[2:]) {
		t.Fatalf("after the cursor: %v, want %v", got, want[2:])
	}
	if lo, hi, err := f.s.AppChangesRange(f.ctx); err != nil || lo != 1 || hi != 4 {
		t.Fatalf("range %d..%d %v, want 1..4", lo, hi, err)
	}
}

// testAppChangesConcurrent: writers committing at once still log their
// changes in commit order: a reader that has seen seq N never later finds
// a smaller one appear (so a cursor never skips a change).
func testAppChangesConcurrent(t *testing.T, f *fixture) {
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := f.s.CreatePlaybook(f.ctx, store.CreatePlaybookParams{ID: newID(), Project: "studio",
					Name: fmt.Sprintf("p-%d-%d", w, i), Prompt: "x", Now: f.tick()}); err != nil {
					errs <- err
				}
			}
		}()
	}
	// A reader follows the log while they write: what it has seen once
	// only ever grows at the end.
	var seen int64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for _, c := range f.changesAfter(seen) {
			if c.Seq != seen+1 {
				t.Fatalf("after %d the log shows %d: a change committed out of order", seen, c.Seq)
			}
			seen = c.Seq
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if seen != writers*each {
		t.Fatalf("saw %d changes, want %d", seen, writers*each)
	}
}
