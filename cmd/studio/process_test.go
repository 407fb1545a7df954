package main

import (
	"bufio"
	"context"
	"database/sql"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/openapi/openapitest"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// buildBinary builds the studio binary once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "studio-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "studio")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{string(out)}
	}
	return bin, nil
})

type buildError struct{ out string }

func (e *buildError) Error() string { return "go build: " + e.out }

// daemon is a running `studio serve` process.
type daemon struct {
	cmd    *exec.Cmd
	URL    string
	client *apiclient.Client
	logs   *strings.Builder
	mu     *sync.Mutex
	exited chan struct{}
	addr   chan string // the address it serves, once it does
	dir    string
}

var addrRE = regexp.MustCompile(`[ \t]addr=(http://127\.0\.0\.1:\d+)`)

// startDaemon starts the built binary on a free loopback port.
func startDaemon(t *testing.T, dataDir string, args ...string) *daemon {
	t.Helper()
	d := spawnDaemon(t, dataDir, args...)
	d.ready(t)
	return d
}

// spawnDaemon starts the built binary on a free loopback port without
// waiting for it to serve (ready waits).
func spawnDaemon(t testing.TB, dataDir string, args ...string) *daemon {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return spawnDaemonOf(t, bin, dataDir, args...)
}

// spawnDaemonEnv is spawnDaemon with more environment variables
// (NAME=value), for a test that runs in parallel with others.
func spawnDaemonEnv(t testing.TB, env []string, dataDir string, args ...string) *daemon {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return spawnDaemonOfEnv(t, bin, env, dataDir, args...)
}

// spawnDaemonOf is spawnDaemon of a given binary.
func spawnDaemonOf(t testing.TB, bin, dataDir string, args ...string) *daemon {
	t.Helper()
	return spawnDaemonOfEnv(t, bin, nil, dataDir, args...)
}

func spawnDaemonOfEnv(t testing.TB, bin string, env []string, dataDir string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir}, args...)...)
	cmd.Env = append(append(os.Environ(), "STUDIO_TOKEN="), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, logs: &strings.Builder{}, mu: &sync.Mutex{}, exited: make(chan struct{}), addr: make(chan string, 1), dir: dataDir}
	addr := d.addr
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.logs.WriteString(line + "\n")
			d.mu.Unlock()
			if m := addrRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.kill(); <-d.exited })
	return d
}

// ready waits until the daemon serves and gives it a client.
func (d *daemon) ready(t testing.TB) {
	t.Helper()
	select {
	case d.URL = <-d.addr:
	case <-d.exited:
		t.Fatalf("daemon exited at start:\n%s", d.Logs())
	case <-time.After(90 * time.Second):
		t.Fatalf("daemon did not start:\n%s", d.Logs())
	}
	token, err := os.ReadFile(filepath.Join(d.dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	// Every JSON answer the tests read is validated against the OpenAPI document.
	d.client = apiclient.New(d.URL, strings.TrimSpace(string(token)), &http.Client{Transport: openapitest.New(t).Transport(nil)})
}

func (d *daemon) Logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

func (d *daemon) kill() { _ = d.cmd.Process.Signal(syscall.SIGKILL) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func writeScript(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const slowScript = `{"turns":[
 {"match":"slow","steps":[{"text":"thinking "},{"sleepMs":600000},{"text":"never"}]},
 {"steps":[{"text":"Hel"},{"text":"lo"}]}]}`

func TestProcessKill9MidTurnThenReplay(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	scriptPath := writeScript(t, slowScript)
	d := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	ctx := testCtx(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	acc, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "slow please",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the turn is visibly running, then kill the daemon hard.
	err = d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		if p, ok := f.Payload.(protocol.TextPayload); ok && strings.TrimSpace(p.Content) == "thinking" {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	<-d.exited

	d2 := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	if !strings.Contains(d2.Logs(), "interrupted by restart") {
		t.Logf("logs:\n%s", d2.Logs())
	}
	var frames []protocol.Frame
	err = d2.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		frames = append(frames, f)
		if f.Type == protocol.FrameDone {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if f.Sequence != int64(i+1) || f.RequestID != acc.RequestID {
			t.Fatalf("frame %d: sequence %d request %s", i, f.Sequence, f.RequestID)
		}
	}
	n := len(frames)
	if n < 4 {
		t.Fatalf("got %d frames: %+v", n, frames)
	}
	e, ok := frames[n-2].Payload.(protocol.ErrorPayload)
	if !ok || e.Error.Code != protocol.ServiceRestarted {
		t.Fatalf("second to last frame %+v, want error service_restarted", frames[n-2])
	}
	if d, ok := frames[n-1].Payload.(protocol.DonePayload); !ok || d.Outcome != protocol.OutcomeFailed || d.LastSequence != int64(n) {
		t.Fatalf("last frame %+v, want done(failed)", frames[n-1])
	}
	// Replay from every cursor gives the matching tail.
	for after := range n {
		var got []protocol.Frame
		err := d2.client.Stream(ctx, conv.ID, int64(after), func(f protocol.Frame) error {
			got = append(got, f)
			if f.Sequence == int64(n) {
				return apiclient.ErrStopStream
			}
			return nil
		})
		if err != nil || len(got) != n-after || got[0].Sequence != int64(after+1) {
			t.Fatalf("replay after %d: %d frames, %v", after, len(got), err)
		}
	}
	// The conversation accepts a new turn, which completes.
	last := int64(n)
	acc2, err := d2.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "hello",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		t.Fatal(err)
	}
	var outcome protocol.Outcome
	err = d2.client.Stream(ctx, conv.ID, last, func(f protocol.Frame) error {
		if p, ok := f.Payload.(protocol.DonePayload); ok && f.RequestID == acc2.RequestID {
			outcome = p.Outcome
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil || outcome != protocol.OutcomeCompleted {
		t.Fatalf("new turn: outcome %q, %v", outcome, err)
	}
	// The token never appears in the logs.
	token, _ := os.ReadFile(filepath.Join(dataDir, "token"))
	if strings.Contains(d.Logs()+d2.Logs(), strings.TrimSpace(string(token))) {
		t.Fatal("the daemon logged its token")
	}
}

func TestProcessGracefulShutdownEndsTurnsHonestly(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	scriptPath := writeScript(t, slowScript)
	d := startDaemon(t, dataDir, "--model", "script:"+scriptPath, "--shutdown-grace", "100ms")
	ctx := testCtx(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	acc, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "slow",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	streamErr := make(chan error, 1)
	var seen []protocol.Frame
	go func() {
		streamErr <- d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
			seen = append(seen, f)
			if p, ok := f.Payload.(protocol.TextPayload); ok && strings.TrimSpace(p.Content) == "thinking" {
				_ = d.cmd.Process.Signal(syscall.SIGTERM)
			}
			return nil
		})
	}()
	select {
	case <-d.exited:
	case <-ctx.Done():
		t.Fatal("daemon did not exit on SIGTERM")
	}
	<-streamErr // the stream ends cleanly when the daemon closes
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, d.Logs())
	}
	d2 := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	page, err := d2.client.GetConversation(ctx, conv.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := len(page.Frames)
	last := page.Frames[n-1]
	if last.Type != protocol.FrameDone || last.RequestID != acc.RequestID || !strings.Contains(string(last.Payload), `"failed"`) {
		t.Fatalf("last frame %+v", last)
	}
	if !strings.Contains(string(page.Frames[n-2].Payload), "service_restarted") {
		t.Fatalf("frame before done: %s", page.Frames[n-2].Payload)
	}
	if strings.Contains(d2.Logs(), "interrupted by restart") {
		t.Fatal("graceful shutdown left a turn for recovery")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopPostgres()
	if bin, err := buildBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// awaitProposal follows a conversation's frames from the start until a
// proposal waits for its confirmation, and returns that proposal.
func awaitProposal(ctx context.Context, cl *apiclient.Client, convID string) (protocol.CommandProposal, error) {
	var prop protocol.CommandProposal
	err := cl.Stream(ctx, convID, 0, func(f protocol.Frame) error {
		if p, ok := f.Payload.(protocol.ProposalPayload); ok {
			prop = p.Proposal
		}
		if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired {
			return apiclient.ErrStopStream
		}
		return nil
	})
	return prop, err
}

func TestProcessKill9WhileAwaitingConfirmation(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir) // the default offline model
	ctx := testCtx(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	acc, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "vacuum the database",
		Context: protocol.ContextSnapshot{Space: "system", Route: "/system"}, ExpectedLastSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	prop, err := awaitProposal(ctx, d.client, conv.ID)
	if err != nil || prop.CommandType != "run_maintenance" || prop.Risk != "admin" {
		t.Fatalf("proposal %+v, %v", prop, err)
	}
	// Let the turn park (read its row from the database file), then kill
	// the daemon hard.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "studio.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testutil.Eventually(t, func() bool {
		var status string
		if err := db.QueryRowContext(ctx, `SELECT status FROM studio_operator_turns WHERE request_id = ?`, acc.RequestID).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status == "awaiting_confirmation"
	}, "the turn parked")
	d.kill()
	<-d.exited

	d2 := startDaemon(t, dataDir)
	p, err := d2.client.Proposal(ctx, prop.ID)
	if err != nil || p.Status != "pending" {
		t.Fatalf("after restart the proposal is %+v, %v", p, err)
	}
	res, err := d2.client.Confirm(ctx, conv.ID, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash})
	if err != nil || res.Status != "succeeded" {
		t.Fatalf("confirm after restart: %+v %v", res, err)
	}
	var outcome protocol.Outcome
	var text strings.Builder
	err = d2.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		if tp, ok := f.Payload.(protocol.TextPayload); ok && tp.Role == protocol.RoleAssistant {
			text.WriteString(tp.Content)
		}
		if dp, ok := f.Payload.(protocol.DonePayload); ok && f.RequestID == acc.RequestID {
			outcome = dp.Outcome
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil || outcome != protocol.OutcomeCompleted || !strings.Contains(text.String(), "done") {
		t.Fatalf("turn after confirmation: %q %q %v", outcome, text.String(), err)
	}
}

func TestProcessLoadTool(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	bin, _ := buildBinary()
	out, err := exec.Command(bin, "operator", "load", "--server", d.URL, "--data-dir", dataDir,
		"--conversations", "3", "--turns", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "6 turns done (6 completed)") || !strings.Contains(string(out), "done         p50") {
		t.Fatalf("load output:\n%s", out)
	}
}

func TestProcessBrokenStateDBAnswersServiceFailure(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "studio.db"), []byte("this is not a database, it is a letter"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	re := regexp.MustCompile(`without StateDB.*addr=(http://127\.0\.0\.1:\d+)`)
	sc := bufio.NewScanner(stderr)
	var url string
	for url == "" && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go func() { io.Copy(io.Discard, stderr) }()
	if url == "" {
		t.Fatal("the daemon did not serve without StateDB")
	}
	token, _ := os.ReadFile(filepath.Join(dataDir, "token"))
	cl := apiclient.New(url, strings.TrimSpace(string(token)), nil)
	_, err = cl.CreateConversation(testCtx(t), protocol.CreateConversationRequest{})
	if !protocol.IsCode(err, protocol.ServiceFailure) {
		t.Fatalf("create conversation without StateDB: %v", err)
	}
	// Nothing answered names the database's path; the open
	// health check says degraded, the token adds why.
	if strings.Contains(err.Error(), dataDir) {
		t.Errorf("the 503 names the data dir: %v", err)
	}
	for _, tok := range []string{"", strings.TrimSpace(string(token))} {
		req, _ := http.NewRequestWithContext(testCtx(t), "GET", url+"/healthz", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode != 503 || strings.Contains(string(b), dataDir):
			t.Errorf("healthz (token %v): %d %s", tok != "", resp.StatusCode, b)
		case tok == "" && strings.TrimSpace(string(b)) != `{"status":"degraded"}`:
			t.Errorf("open healthz: %s", b)
		case tok != "" && !strings.Contains(string(b), "not a database"):
			t.Errorf("healthz with the token: %s", b)
		}
	}
}

func TestProcessCLI(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	bin, _ := buildBinary()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--data-dir", dataDir}, args...)...)
		cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("studio %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("operator", "conversations", "create", "--title", "cli", "-o", "json")
	id := regexp.MustCompile(`"id": "([0-9a-f-]{36})"`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("create: %s", out)
	}
	conv := id[1]
	if out := run("operator", "send", "--conversation", conv, "show failed runs"); !strings.Contains(out, "There are no failed runs.") {
		t.Fatalf("send: %s", out)
	}
	out = run("operator", "send", "--conversation", conv, "vacuum the database")
	pid := regexp.MustCompile(`studio operator confirm ([0-9a-f-]{36})`).FindStringSubmatch(out)
	if pid == nil || !strings.Contains(out, "The turn waits for a decision") {
		t.Fatalf("send a change: %s", out)
	}
	if out := run("operator", "proposals"); !strings.Contains(out, pid[1]) || !strings.Contains(out, "admin") || !strings.Contains(out, "left") {
		t.Fatalf("proposals: %s", out)
	}
	if out := run("operator", "confirm", "--yes", pid[1], "-o", "json"); !strings.Contains(out, `"status": "succeeded"`) || !strings.Contains(out, "hash") {
		t.Fatalf("confirm: %s", out)
	}
	if out := run("operator", "conversations", "show", conv); !strings.Contains(out, "executed") || !strings.Contains(out, "— turn completed (#") {
		t.Fatalf("show: %s", out)
	}
	if out := run("operator", "conversations", "list"); !strings.Contains(out, conv) || !strings.Contains(out, "cli") {
		t.Fatalf("list: %s", out)
	}
	if out := run("operator", "ticket", "--conversation", conv, "--json"); !strings.Contains(out, `"ticket"`) {
		t.Fatalf("ticket: %s", out)
	}
	run("operator", "conversations", "rename", conv, "renamed")
	if out := run("operator", "conversations", "archive", conv); !strings.Contains(out, "archived") {
		t.Fatalf("archive: %s", out)
	}
	run("operator", "conversations", "unarchive", conv)
	if out := run("operator", "conversations", "delete", conv); !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %s", out)
	}
	if out := run("doctor"); !strings.Contains(out, "ok") {
		t.Fatalf("doctor: %s", out)
	}
	if out := run("version"); !strings.Contains(out, "protocol version 1") {
		t.Fatalf("version: %s", out)
	}
}
