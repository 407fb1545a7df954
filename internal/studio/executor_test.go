package studio_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

func textStep(s string) script.Step { return script.Step{Text: ptr(s)} }

func sleepStep(ms int64) script.Step { return script.Step{SleepMs: ptr(ms)} }

// runFx is a started service with the playbook "audit-repo".
func runFx(t *testing.T, s script.Script, cfg func(*studio.Config)) *fx {
	t.Helper()
	f := newFx(t, fxOpts{script: &s, cfg: cfg})
	f.exec(studio.CreatePlaybookCommand{Name: "audit-repo", Prompt: "Audit the repository {{repo}}.",
		Args: []studio.PlaybookArg{{Name: "repo", Required: true}}})
	f.start()
	return f
}

func (f *fx) launch(input string) studio.Run {
	f.t.Helper()
	return *f.exec(studio.LaunchPlaybookCommand{Playbook: "audit-repo", Input: input, Args: map[string]string{"repo": "studio"}}).Run
}

func isStatus(s string) func(studio.Run) bool {
	return func(r studio.Run) bool { return r.Status == s }
}

func TestRunSucceeds(t *testing.T) {
	t.Parallel()
	// The script answers only when the rendered prompt reached it: the
	// playbook's prompt with its argument, and the input.
	f := runFx(t, script.Script{Turns: []script.Turn{{Match: "Audit the repository studio.\n\nInput:\nfocus on tests",
		Steps: []script.Step{textStep("Found "), textStep("3 issues.")}}}}, nil)
	r := f.launch("focus on tests")
	if r.Status != "queued" || r.StartedAt != nil {
		t.Fatalf("launched run = %+v", r)
	}
	done := f.waitRun(r.ID, studio.RunEnded)
	if done.Status != "succeeded" || done.Output != "Found 3 issues." || done.Error != nil || done.OutputTruncated {
		t.Fatalf("run = %+v", done)
	}
	if done.StartedAt == nil || done.EndedAt == nil || done.DurationMs == nil || done.Version != 3 {
		t.Fatalf("run times and version = %+v", done)
	}
}

func TestRunFailsWithProviderError(t *testing.T) {
	t.Parallel()
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{textStep("partial "),
		{Fail: &protocol.Error{Code: protocol.RateLimited, Message: "provider quota exhausted", Retryable: true}}}}}}, nil)
	done := f.waitRun(f.launch("x").ID, studio.RunEnded)
	if done.Status != "failed" || done.Error == nil || done.Error.Code != "rate_limited" || done.Error.Message != "provider quota exhausted" {
		t.Fatalf("run = %+v", done)
	}
	if done.Output != "partial " {
		t.Fatalf("partial output = %q", done.Output)
	}
}

func TestRunFailsWithoutModel(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{noModel: true})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	f.start()
	r := f.exec(studio.LaunchPlaybookCommand{Playbook: "p"}).Run
	done := f.waitRun(r.ID, studio.RunEnded)
	if done.Status != "failed" || done.Error.Code != "model_failure" || !strings.Contains(done.Error.Message, "no model provider") {
		t.Fatalf("run = %+v", done)
	}
}

func TestRunCancelWhileRunning(t *testing.T) {
	t.Parallel()
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{sleepStep(600_000), textStep("never")}}}}, nil)
	r := f.launch("slow")
	f.waitRun(r.ID, isStatus("running"))
	res := f.exec(studio.CancelRunCommand{Run: r.ID})
	if res.Run.CancelRequestedAt == nil {
		t.Fatalf("cancel answer = %+v", res.Run)
	}
	done := f.waitRun(r.ID, studio.RunEnded)
	if done.Status != "cancelled" || done.Error == nil || done.Error.Code != "cancelled" || done.Output != "" {
		t.Fatalf("run = %+v", done)
	}
	// Cancelling again: the run already ended.
	_, err := f.svc.Execute(f.ctx, studio.CancelRunCommand{Run: r.ID}, studio.ExecOptions{})
	wantCode(t, err, protocol.Conflict)
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{sleepStep(600_000)}}}},
		func(c *studio.Config) { c.RunTimeout = 20 * time.Millisecond })
	done := f.waitRun(f.launch("x").ID, studio.RunEnded)
	if done.Status != "failed" || !strings.Contains(done.Error.Message, "did not finish within") {
		t.Fatalf("run = %+v", done)
	}
}

func TestRunOutputBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300) // 600 bytes
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{textStep(long)}}}},
		func(c *studio.Config) { c.MaxOutputBytes = 256 })
	done := f.waitRun(f.launch("x").ID, studio.RunEnded)
	if done.Status != "succeeded" || !done.OutputTruncated || len(done.Output) > 256 ||
		!strings.Contains(done.Output, "[output truncated") || !strings.HasPrefix(done.Output, "éé") {
		t.Fatalf("output (%d bytes, truncated %v) = %q", len(done.Output), done.OutputTruncated, done.Output)
	}
	if !strings.HasPrefix(done.Output, strings.Repeat("é", (strings.Index(done.Output, "\n"))/2)) {
		t.Fatal("truncation cut a character in half")
	}
}

// TestRunWorkersBounded: more runs than workers all finish.
func TestRunWorkersBounded(t *testing.T) {
	t.Parallel()
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{textStep("ok")}}}},
		func(c *studio.Config) { c.Workers = 1 })
	var ids []string
	for range 5 {
		ids = append(ids, f.launch("x").ID)
	}
	for _, id := range ids {
		if r := f.waitRun(id, studio.RunEnded); r.Status != "succeeded" {
			t.Fatalf("run = %+v", r)
		}
	}
}

// TestRestartLeavesNoRunRunning: a process that died with a run running and
// one queued leaves them in the database; the next start fails both with an
// error saying the daemon restarted.
func TestRestartLeavesNoRunRunning(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	f.exec(studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	a := f.exec(studio.LaunchPlaybookCommand{Playbook: "p"}).Run
	b := f.exec(studio.LaunchPlaybookCommand{Playbook: "p"}).Run
	if _, ok, err := f.st.ClaimRun(f.ctx, store.ClaimRunParams{Now: f.clock.Now()}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// The "process" ends without finishing anything: reopen the file.
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, f.path)
	f.clock.Advance(time.Minute)
	svc := f.service(st, fxOpts{})
	if err := svc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID, b.ID} {
		r, err := svc.GetRun(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "failed" || r.Error == nil || r.Error.Code != "service_restarted" || !strings.Contains(r.Error.Message, "restarted") {
			t.Fatalf("run after restart = %+v", r)
		}
	}
	page, err := svc.ListRuns(f.ctx, studio.RunQuery{Status: "running"})
	if err != nil || len(page.Runs) != 0 {
		t.Fatalf("running after restart: %+v, %v", page.Runs, err)
	}
}

// TestStopEndsRunningRuns: shutting down does not leave a run running.
func TestStopEndsRunningRuns(t *testing.T) {
	t.Parallel()
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{sleepStep(600_000)}}}}, nil)
	r := f.launch("x")
	f.waitRun(r.ID, isStatus("running"))
	f.svc.Stop(context.Background())
	got, err := f.svc.GetRun(f.ctx, r.ID)
	if err != nil || got.Status != "failed" || got.Error.Code != "service_restarted" || !strings.Contains(got.Error.Message, "shut down") {
		t.Fatalf("run after stop = %+v, %v", got, err)
	}
	if err := f.svc.Start(f.ctx); err == nil {
		t.Fatal("a stopped service started again")
	}
}

func TestRenderPrompt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prompt, input string
		args          map[string]string
		want          string
	}{
		{"Audit {{repo}}.", "", map[string]string{"repo": "x"}, "Audit x."},
		{"Audit {{repo}}: {{input}}", "quick", map[string]string{"repo": "x"}, "Audit x: quick"},
		{"Audit.", "quick", map[string]string{"repo": "x", "a": "1"}, "Audit.\n\nArguments:\n- a: 1\n- repo: x\n\nInput:\nquick"},
		// Values are not expanded again.
		{"{{a}} {{b}}", "", map[string]string{"a": "{{b}}", "b": "B"}, "{{b}} B"},
	} {
		if got := studio.RenderPrompt(tc.prompt, tc.input, tc.args); got != tc.want {
			t.Errorf("RenderPrompt(%q) = %q, want %q", tc.prompt, got, tc.want)
		}
	}
}

// TestRunOutputWhileRunning: a running run's output is saved as it grows
// (the first text at once, then by size or time), without a version bump,
// and the end writes the whole output.
func TestRunOutputWhileRunning(t *testing.T) {
	t.Parallel()
	f := runFx(t, script.Script{Turns: []script.Turn{{Steps: []script.Step{
		textStep("Found "), textStep("3"), sleepStep(600_000), textStep("never")}}}},
		func(c *studio.Config) { c.OutputFlushBytes, c.OutputFlushInterval = 1, time.Hour })
	r := f.launch("x")
	live := f.waitRun(r.ID, func(r studio.Run) bool { return r.Output == "Found 3" })
	if live.Status != "running" || live.Version != 2 {
		t.Fatalf("run with partial output = %+v", live)
	}
	f.exec(studio.CancelRunCommand{Run: r.ID})
	done := f.waitRun(r.ID, studio.RunEnded)
	if done.Status != "cancelled" || done.Output != "Found 3" {
		t.Fatalf("run = %+v", done)
	}
}
