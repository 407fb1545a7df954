package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// runStudio runs the built binary against a daemon and returns stdout, stderr
// and the exit code.
func runStudio(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestProcessExitCodesAndJSON: every exit code of the table in --help, and
// -o json on the listing and show commands.
func TestProcessExitCodesAndJSON(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	env := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		out, errOut, code := runStudio(t, env, args...)
		if code != want {
			t.Fatalf("studio %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out, errOut
	}
	jsonOf := func(out string, v any) {
		t.Helper()
		decodeCLIJSON(t, out, v)
	}

	help, _ := run(exitOK, "--help")
	for _, want := range []string{"Exit codes:", "3  not found", "5  the daemon cannot be reached", "Examples:"} {
		if !strings.Contains(help, want) {
			t.Fatalf("--help lacks %q:\n%s", want, help)
		}
	}
	if out, _ := run(exitOK, "--version"); !strings.HasPrefix(out, "studio ") || !strings.Contains(out, "protocol version 1") {
		t.Fatalf("--version: %s", out)
	}

	// Usage mistakes: 2, with a pointer to --help.
	if _, errOut := run(exitUsage, "no-such-command"); !strings.Contains(errOut, "--help") {
		t.Fatalf("unknown command: %s", errOut)
	}
	run(exitUsage, "operator", "conversations", "list", "--no-such-flag")
	run(exitUsage, "operator", "conversations", "list", "-o", "yaml")
	run(exitUsage, "runs", "list", "-o", "yaml")
	run(exitUsage, "runs", "show")

	// Not found: 3.
	missing := "00000000-0000-4000-8000-000000000000"
	run(exitNotFound, "operator", "conversations", "show", missing)
	run(exitNotFound, "runs", "show", missing)
	run(exitNotFound, "playbooks", "show", "no-such-playbook")

	// Conflict: 4 (a turn submitted to an archived conversation).
	var conv protocol.Conversation
	out, _ := run(exitOK, "operator", "conversations", "create", "--title", "codes", "-o", "json")
	jsonOf(out, &conv)
	run(exitOK, "operator", "conversations", "archive", conv.ID)
	run(exitConflict, "operator", "send", "--conversation", conv.ID, "hello")

	// Unreachable: 5, in words.
	_, errOut, code := runStudio(t, []string{"STUDIO_URL=http://127.0.0.1:1", "STUDIO_TOKEN=x"}, "runs", "list")
	if code != exitUnreachable || !strings.Contains(errOut, "cannot reach the daemon at http://127.0.0.1:1: is `studio serve` running?") {
		t.Fatalf("unreachable: exit %d: %s", code, errOut)
	}
	// doctor with the daemon down: the database report, and exit 5.
	out, errOut, code = runStudio(t, []string{"STUDIO_URL=http://127.0.0.1:1", "STUDIO_TOKEN=x", "STUDIO_DATA_DIR=" + dataDir}, "doctor")
	if code != exitUnreachable || !strings.Contains(out, "no daemon answered") || !strings.Contains(errOut, "the daemon is down") {
		t.Fatalf("doctor, daemon down: exit %d\n%s\n%s", code, out, errOut)
	}
	// Other errors: 1 (doctor of a data dir without a database).
	_, _, code = runStudio(t, []string{"STUDIO_TOKEN=x", "STUDIO_DATA_DIR=" + t.TempDir()}, "doctor", "--local")
	if code != exitFailure {
		t.Fatalf("doctor --local without a database: exit %d", code)
	}

	// -o json (and --json) on listings and shows; tables have headers.
	var convs protocol.ConversationList
	out, _ = run(exitOK, "operator", "conversations", "list", "--json")
	jsonOf(out, &convs)
	if len(convs.Conversations) != 1 || convs.Conversations[0].ID != conv.ID {
		t.Fatalf("conversations list: %s", out)
	}
	if out, _ := run(exitOK, "operator", "conversations", "list"); !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "codes") {
		t.Fatalf("conversations table: %s", out)
	}
	var page struct {
		Conversation protocol.Conversation `json:"conversation"`
		Frames       []protocol.RawFrame   `json:"frames"`
	}
	out, _ = run(exitOK, "operator", "conversations", "show", conv.ID, "-o", "json")
	jsonOf(out, &page)
	if page.Conversation.ID != conv.ID || page.Frames == nil {
		t.Fatalf("conversations show: %s", out)
	}
	var pbs studio.PlaybookPage
	out, _ = run(exitOK, "playbooks", "list", "-o", "json")
	jsonOf(out, &pbs)
	if len(pbs.Playbooks) != len(studio.StarterPlaybooks) {
		t.Fatalf("playbooks list: %s", out)
	}
	if out, _ := run(exitOK, "playbooks", "list"); !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "audit-repo") {
		t.Fatalf("playbooks table: %s", out)
	}
	var pb studio.Playbook
	out, _ = run(exitOK, "playbooks", "show", "audit-repo", "-o", "json")
	jsonOf(out, &pb)
	var launched studio.Run
	out, _ = run(exitOK, "playbooks", "launch", "audit-repo", "--arg", "repo=acme/api", "-o", "json")
	jsonOf(out, &launched)
	if launched.PlaybookID != pb.ID || launched.Status != "queued" {
		t.Fatalf("launch: %s", out)
	}
	var runs studio.RunPage
	out, _ = run(exitOK, "runs", "list", "--playbook", "audit-repo", "-o", "json")
	jsonOf(out, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != launched.ID {
		t.Fatalf("runs list: %s", out)
	}
	var shown studio.Run
	out, _ = run(exitOK, "runs", "show", launched.ID, "--json")
	jsonOf(out, &shown)
	if shown.ID != launched.ID {
		t.Fatalf("runs show: %s", out)
	}
	var scs studio.SchedulePage
	out, _ = run(exitOK, "schedules", "list", "-o", "json")
	jsonOf(out, &scs)
	if len(scs.Schedules) != 1 || scs.Schedules[0].Enabled {
		t.Fatalf("schedules list: %s", out)
	}
	if out, _ := run(exitOK, "schedules", "resume", scs.Schedules[0].Name); !strings.Contains(out, "true") {
		t.Fatalf("schedules resume: %s", out)
	}
	run(exitOK, "schedules", "pause", scs.Schedules[0].Name)
	var props struct {
		Proposals []protocol.ProposalState `json:"proposals"`
	}
	out, _ = run(exitOK, "operator", "proposals", "-o", "json")
	jsonOf(out, &props)
	var rep studio.DoctorReport
	out, _ = run(exitOK, "doctor", "-o", "json")
	jsonOf(out, &rep)
	if rep.Status == "" {
		t.Fatalf("doctor: %s", out)
	}
}

var metricsAddrRE = regexp.MustCompile(`metrics_addr=(http://127\.0\.0\.1:\d+/metrics)`)

// TestProcessMetricsAndLogs scrapes /metrics after real requests, a turn
// streamed live and a playbook run, on the token-protected listener and on
// --metrics-addr, and reads the access log.
func TestProcessMetricsAndLogs(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// The default model is named "local", of kind offline: the provider
	// label is the name.
	d := startDaemon(t, dataDir, "--metrics-addr", "127.0.0.1:0", "--log-format", "text", "--model", "local", "--provider", "local=offline")
	m := metricsAddrRE.FindStringSubmatch(d.Logs())
	if m == nil {
		t.Fatalf("no metrics address in the logs:\n%s", d.Logs())
	}
	scrape := func(url, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Go's profiles are served only when asked for (--pprof).
	if code, _ := scrape(strings.TrimSuffix(m[1], "/metrics")+"/debug/pprof/", ""); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ without --pprof: %d, want 404", code)
	}
	ctx := testCtx(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Follow the conversation first, so the turn's frames are live.
	done := make(chan error, 1)
	go func() {
		done <- d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
			if f.Type == protocol.FrameDone {
				return apiclient.ErrStopStream
			}
			return nil
		})
	}()
	testutil.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("the stream ended early: %v", err)
		default:
		}
		_, body := scrape(m[1], "")
		return strings.Contains(body, "studio_operator_streams_open 1")
	}, "the stream open")
	zero := int64(0)
	if _, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "how many runs failed today?",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The turn is counted after its done frame is durable, which a client
	// may read first: wait for the count.
	testutil.Eventually(t, func() bool {
		_, body := scrape(m[1], "")
		return strings.Contains(body, `studio_operator_turns_total{code="",outcome="completed"} 1`)
	}, "the ended turn counted")
	run, err := d.client.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, func() bool { // the run executes on the daemon
		if run, err = d.client.GetRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		return studio.RunEnded(run)
	}, "the run's end")
	if _, err := d.client.GetConversation(ctx, "00000000-0000-4000-8000-000000000000", 0, 1); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("missing conversation: %v", err)
	}
	token, _ := os.ReadFile(dataDir + "/token")
	if code, _ := scrape(d.URL+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics on the main listener without the token: %d", code)
	}
	for _, src := range []struct{ url, token string }{{d.URL + "/metrics", strings.TrimSpace(string(token))}, {m[1], ""}} {
		code, body := scrape(src.url, src.token)
		if code != 200 {
			t.Fatalf("%s: %d", src.url, code)
		}
		for _, family := range []string{
			"studio_build_info{", "go_goroutines ", "process_resident_memory_bytes ",
			`studio_http_requests_total{method="POST",route="/api/operator/conversations/{id}/turns",status="2xx"} 1`,
			`studio_http_request_duration_seconds_bucket{method="GET",route="/api/app/runs/{id}",`,
			`studio_http_errors_total{code="not_found"}`, "studio_auth_failures_total 1",
			"studio_operator_turns_submitted_total 1", "studio_operator_frames_streamed_total ",
			"studio_operator_commit_to_flush_seconds_count ", "studio_operator_streams_open ", "studio_operator_stream_store_reads_total ",
			`studio_model_time_to_first_token_seconds_count{provider="local"}`,
			`studio_model_call_duration_seconds_count{outcome="ok",provider="local"}`,
			`studio_model_calls_total{outcome="ok",provider="local"}`,
			`studio_app_runs_total{status="succeeded"} 1`, `studio_app_run_duration_seconds_count{status="succeeded"} 1`,
			"studio_app_runs_running 0",
			`studio_operator_turns_total{code="",outcome="completed"} 1`,
			`studio_operator_turn_duration_seconds_count{outcome="completed",provider="local"} 1`,
			`studio_store_operation_duration_seconds_count{operation="submit_turn"} 1`,
			`studio_store_operation_duration_seconds_count{operation="append_frames"}`,
			"studio_store_writer_batch_size_count ", "studio_store_writer_queue_wait_seconds_count ",
			"studio_store_writer_oldest_wait_seconds ", "studio_operator_proposals_pending 0",
			"studio_operator_turn_queue_wait_seconds_count 1", "studio_operator_turn_queue_depth 0",
			`studio_operator_frames_appended_total{outcome="completed"}`,
		} {
			if !strings.Contains(body, family) {
				t.Errorf("%s lacks %s", src.url, family)
			}
		}
		for _, gone := range []string{"studio_go_goroutines", `provider="offline"`, `route="GET `, `route="POST `} {
			if strings.Contains(body, gone) {
				t.Errorf("%s has %s", src.url, gone)
			}
		}
		if strings.Contains(body, "studio_operator_commit_to_flush_seconds_count 0") {
			t.Errorf("%s: no live frame was measured from commit to flush", src.url)
		}
	}
	logs := d.Logs()
	for _, want := range []string{`msg="http request" method=POST route=/api/operator/conversations/{id}/turns path=/api/operator/conversations/` + conv.ID + `/turns status=202`,
		`msg="auth failure" route=/metrics`, `msg="run ended" run=` + run.ID,
		`msg="turn ended" conversation=` + conv.ID} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, strings.TrimSpace(string(token))) {
		t.Fatal("the daemon logged its token")
	}
}

// TestProcessProviderWarning: a provider that cannot work is named at start.
func TestProcessProviderWarning(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--model", "anthropic", "--log-format", "json")
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=", "STUDIO_ANTHROPIC_BASE_URL=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	dec := json.NewDecoder(stderr)
	for {
		var line map[string]any
		if err := dec.Decode(&line); err != nil {
			t.Fatalf("no warning before the log ended: %v", err)
		}
		if line["level"] == "WARN" && strings.Contains(line["msg"].(string), "cannot work") {
			if !strings.Contains(line["problem"].(string), "ANTHROPIC_API_KEY") {
				t.Fatalf("the warning does not name the setting: %v", line)
			}
			break
		}
		if line["msg"] == "studio serving" {
			t.Fatal("served without warning that the provider cannot work")
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
}

// TestProcessPprof: --pprof serves Go's profiles on the metrics listener.
func TestProcessPprof(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--pprof")
	m := metricsAddrRE.FindStringSubmatch(d.Logs())
	if m == nil {
		t.Fatalf("no metrics address in the logs:\n%s", d.Logs())
	}
	req, _ := http.NewRequestWithContext(testCtx(t), "GET", strings.TrimSuffix(m[1], "/metrics")+"/debug/pprof/goroutine?debug=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "goroutine profile") {
		t.Fatalf("GET /debug/pprof/goroutine: %d %.200s", resp.StatusCode, b)
	}
}
