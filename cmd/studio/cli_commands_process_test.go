package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// cliRunner runs the binary against one daemon and checks the exit code.
type cliRunner struct {
	t   *testing.T
	env []string
}

func newCLIRunner(t *testing.T, d *daemon, dataDir string) *cliRunner {
	return &cliRunner{t: t, env: []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}}
}

// run runs studio with args and fails the test unless it exits with want.
func (c *cliRunner) run(want int, args ...string) (string, string) {
	c.t.Helper()
	out, errOut, code := runStudio(c.t, c.env, args...)
	if code != want {
		c.t.Fatalf("studio %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
	}
	return out, errOut
}

// json runs studio with args (expecting success) and decodes its stdout.
func (c *cliRunner) json(v any, args ...string) {
	c.t.Helper()
	out, _ := c.run(exitOK, args...)
	decodeCLIJSON(c.t, out, v)
}

// sharedFirstChar returns a one-character prefix two of ids share.
func sharedFirstChar(t *testing.T, ids []string) string {
	t.Helper()
	seen := map[byte]bool{}
	for _, id := range ids {
		if seen[id[0]] {
			return id[:1]
		}
		seen[id[0]] = true
	}
	t.Fatalf("no two of %d ids share a first character", len(ids))
	return ""
}

// unusedPrefix returns an 8-character prefix none of ids has.
func unusedPrefix(t *testing.T, ids []string) string {
	t.Helper()
	for _, p := range []string{"00000000", "11111111", "22222222", "33333333"} {
		if !slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, p) }) {
			return p
		}
	}
	t.Fatal("every candidate prefix is used")
	return ""
}

// TestProcessIDPrefixes: the 8 characters the cockpit shows name a run, a
// conversation or a proposal; a prefix several ids share is ambiguous
// (exit 2) and lists them; one no id has is not found (exit 3).
func TestProcessIDPrefixes(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)
	ctx := testCtx(t)

	// 17 runs and 17 conversations: two of each share a first character.
	var runIDs, convIDs []string
	for range 17 {
		r, err := d.client.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
		if err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, r.ID)
		conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
		if err != nil {
			t.Fatal(err)
		}
		convIDs = append(convIDs, conv.ID)
	}

	var shown studio.Run
	c.json(&shown, "runs", "show", runIDs[3][:8], "-o", "json")
	if shown.ID != runIDs[3] {
		t.Fatalf("runs show %s: %s", runIDs[3][:8], shown.ID)
	}
	p := sharedFirstChar(t, runIDs)
	_, errOut := c.run(exitUsage, "runs", "show", p)
	if !strings.Contains(errOut, "ambiguous") {
		t.Fatalf("ambiguous run prefix: %s", errOut)
	}
	for _, id := range runIDs {
		if strings.HasPrefix(id, p) && !strings.Contains(errOut, id) {
			t.Fatalf("the ambiguous run prefix %s does not list %s:\n%s", p, id, errOut)
		}
	}
	c.run(exitNotFound, "runs", "show", unusedPrefix(t, runIDs))
	c.run(exitUsage, "runs", "cancel", p)

	var page struct {
		Conversation protocol.Conversation `json:"conversation"`
	}
	c.json(&page, "operator", "conversations", "show", convIDs[5][:8], "-o", "json")
	if page.Conversation.ID != convIDs[5] {
		t.Fatalf("conversations show %s: %s", convIDs[5][:8], page.Conversation.ID)
	}
	p = sharedFirstChar(t, convIDs)
	if _, errOut := c.run(exitUsage, "operator", "conversations", "rename", p, "x"); !strings.Contains(errOut, "ambiguous") {
		t.Fatalf("ambiguous conversation prefix: %s", errOut)
	}
	var conv protocol.Conversation
	c.json(&conv, "operator", "conversations", "rename", convIDs[6][:8], "renamed", "-o", "json")
	if conv.ID != convIDs[6] || conv.Title == nil || *conv.Title != "renamed" {
		t.Fatalf("rename by prefix: %+v", conv)
	}

	// A proposal by its prefix: send parks on the confirmation.
	pid := pendingProposal(t, c, "--conversation", convIDs[7][:8], "resume the nightly schedule")
	var res protocol.ProposalResult
	c.json(&res, "operator", "confirm", "--yes", pid[:8], "-o", "json")
	if res.ProposalID != pid || res.Status != "succeeded" {
		t.Fatalf("confirm by prefix: %+v", res)
	}
}

// TestProcessUsageErrors: an unknown subcommand of a group and a wrong
// enumerated flag value are usage errors (exit 2, the usage on stderr), said
// before any request.
func TestProcessUsageErrors(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)

	out, errOut := c.run(exitUsage, "runs", "bogus")
	if out != "" || !strings.Contains(errOut, `unknown command "bogus" for "studio runs" (its commands: cancel, list, logs, retry, show)`) ||
		strings.Contains(errOut, "Available Commands:") {
		t.Fatalf("runs bogus:\nstdout: %s\nstderr: %s", out, errOut)
	}
	// Did you mean: a near command, flag or value, not the whole usage.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "lst"}, "did you mean `list`?"},
		{[]string{"runs", "lst", "--status", "failed"}, `unknown command "lst" for "studio runs": did you mean ` + "`list`?"},
		{[]string{"rnus", "list"}, "did you mean `runs`?"},
		{[]string{"operator", "conversations", "lsit"}, "did you mean `list`?"},
		{[]string{"runs", "list", "--stauts", "failed"}, "unknown flag: --stauts: did you mean `--status`?"},
		{[]string{"runs", "list", "-status", "failed"}, "did you mean `--status`?"},
		{[]string{"schedules", "edit", "nightly-audit", "--crn", "0 4 * * *"}, "did you mean `--cron`?"},
		{[]string{"runs", "list", "--status", "faild"}, "(did you mean `failed`?)"},
	} {
		out, errOut := c.run(exitUsage, tc.args...)
		if out != "" || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "Available Commands:") || strings.Count(errOut, "\n") > 2 {
			t.Errorf("studio %v:\nstdout: %s\nstderr: %s\nwant %q", tc.args, out, errOut, tc.want)
		}
	}
	c.run(exitUsage, "operator", "conversations", "bogus")
	if out, _ := c.run(exitOK, "runs"); !strings.Contains(out, "Available Commands:") {
		t.Fatalf("runs alone prints its help: %s", out)
	}
	if _, errOut := c.run(exitUsage, "runs", "list", "--status", "bogus"); !strings.Contains(errOut, "queued, running, succeeded, failed, cancelled") {
		t.Fatalf("runs list --status bogus: %s", errOut)
	}
	c.run(exitUsage, "runs", "list", "--trigger", "cron")
	c.run(exitUsage, "schedules", "list", "--enabled", "yes")
	c.run(exitUsage, "operator", "conversations", "list", "--status", "gone")
	c.run(exitUsage, "operator", "proposals", "--status", "pending,bogus")
}

// TestProcessConfirmAndDeny: confirm without a terminal refuses to ask
// (exit 2, "use --yes") and leaves the proposal pending; deny's success
// prints no error.
func TestProcessConfirmAndDeny(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)
	id := pendingProposal(t, c, "resume the nightly schedule")
	// The test's stdin is not a terminal (it is /dev/null).
	if _, errOut := c.run(exitUsage, "operator", "confirm", id); !strings.Contains(errOut, "use --yes") {
		t.Fatalf("confirm without a terminal: %s", errOut)
	}
	p, err := d.client.Proposal(testCtx(t), id)
	if err != nil || p.Status != "pending" {
		t.Fatalf("after the refused confirm: %+v %v", p, err)
	}
	out, errOut := c.run(exitOK, "operator", "deny", id)
	if strings.Contains(out+errOut, "error") || !strings.Contains(out, "denied") {
		t.Fatalf("deny:\nstdout: %s\nstderr: %s", out, errOut)
	}
}

// TestProcessTokenSources: token refuses a data directory without a
// daemon's state (unless --create); a refused token is said to come from
// where the client read it.
func TestProcessTokenSources(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)

	empty := t.TempDir()
	_, errOut, code := runStudio(t, []string{"STUDIO_TOKEN="}, "token", "--data-dir", empty)
	if code != exitFailure || !strings.Contains(errOut, "no daemon state in "+empty) {
		t.Fatalf("token of an empty directory: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(empty, "token")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("token minted a token in an empty directory: %v", err)
	}
	out, _, code := runStudio(t, []string{"STUDIO_TOKEN="}, "token", "--data-dir", empty, "--create")
	if code != exitOK || len(strings.TrimSpace(out)) < 32 {
		t.Fatalf("token --create: exit %d: %s", code, out)
	}
	out, _, code = runStudio(t, []string{"STUDIO_TOKEN="}, "token", "--data-dir", dataDir)
	if b, _ := os.ReadFile(filepath.Join(dataDir, "token")); code != exitOK || out != string(b) {
		t.Fatalf("token of the daemon's directory: exit %d: %q", code, out)
	}

	// Refused: the message names the environment variable or the file.
	_, errOut, code = runStudio(t, []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=wrong"}, "runs", "list")
	if code != exitFailure || !strings.Contains(errOut, "the STUDIO_TOKEN environment variable") {
		t.Fatalf("a wrong STUDIO_TOKEN: exit %d: %s", code, errOut)
	}
	_, errOut, code = runStudio(t, []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN="}, "--data-dir", empty, "runs", "list")
	if code != exitFailure || !strings.Contains(errOut, "read from "+filepath.Join(empty, "token")) {
		t.Fatalf("another daemon's token file: exit %d: %s", code, errOut)
	}
}

// TestProcessSendOptions: send --title (default: the instruction's first
// words), --model, and -o json (the turn's frames as JSON lines).
func TestProcessSendOptions(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	scriptPath := writeScript(t, `{"turns":[{"steps":[{"text":"scripted answer"}]}]}`)
	d := startDaemon(t, dataDir, "--model", "offline", "--provider", "scripted=script:"+scriptPath)
	c := newCLIRunner(t, d, dataDir)

	out, errOut := c.run(exitOK, "operator", "send", "-o", "json", "how many runs failed today? tell me everything you know please")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last protocol.RawFrame
	for _, l := range lines {
		var f protocol.RawFrame
		if decodeCLIJSON(t, l, &f); f.Type == "" || f.CreatedAt == 0 {
			t.Fatalf("send -o json: a line that is not a frame: %q\n%s", l, out)
		}
		last = f
	}
	if len(lines) < 3 || last.Type != "done" {
		t.Fatalf("send -o json: %d frames, the last %q:\n%s", len(lines), last.Type, out)
	}
	m := regexp.MustCompile(`conversation ([0-9a-f-]{36})`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("send names no conversation on stderr: %s", errOut)
	}
	conv, err := d.client.GetConversation(testCtx(t), m[1], 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if conv.Conversation.Title == nil || *conv.Conversation.Title != "how many runs failed today? tell me everything …" {
		t.Fatalf("default title: %q", orDash(conv.Conversation.Title))
	}

	out, errOut = c.run(exitOK, "operator", "send", "--model", "scripted", "--title", "scripted one", "go")
	if !strings.Contains(out, "scripted answer") {
		t.Fatalf("send --model scripted: %s", out)
	}
	m = regexp.MustCompile(`conversation ([0-9a-f-]{36})`).FindStringSubmatch(errOut)
	conv, err = d.client.GetConversation(testCtx(t), m[1], 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if conv.Conversation.Title == nil || *conv.Conversation.Title != "scripted one" || conv.Conversation.Model == nil || *conv.Conversation.Model != "scripted" {
		t.Fatalf("send --title --model: %+v", conv.Conversation)
	}
	c.run(exitUsage, "operator", "send", "-o", "yaml", "hello")
}

// TestProcessLibraryCommands: workflows, audit, schedules show/create/delete
// and playbooks create/edit/delete, over the application API.
func TestProcessLibraryCommands(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	c := newCLIRunner(t, d, dataDir)

	// Playbooks: create (flags), edit (only what changed, at the version
	// read), a stale --expected-version is a conflict, delete.
	var pb studio.Playbook
	c.json(&pb, "playbooks", "create", "triage", "--prompt", "Triage {{input}} for {{team}}", "--required-arg", "team",
		"--arg", "tone=plain", "--description", "sort issues", "-o", "json")
	if pb.Name != "triage" || pb.Version != 1 || len(pb.Args) != 2 || !pb.Args[1].Required {
		t.Fatalf("playbooks create: %+v", pb)
	}
	c.json(&pb, "playbooks", "edit", "triage", "--description", "sort new issues", "-o", "json")
	if pb.Version != 2 || pb.Description != "sort new issues" || pb.Prompt != "Triage {{input}} for {{team}}" || len(pb.Args) != 2 {
		t.Fatalf("playbooks edit: %+v", pb)
	}
	c.run(exitConflict, "playbooks", "edit", "triage", "--description", "x", "--expected-version", "1")
	c.run(exitUsage, "playbooks", "edit", "triage")
	c.run(exitUsage, "playbooks", "create", "nameless")

	// Schedules: create, show, delete.
	var sc studio.Schedule
	c.json(&sc, "schedules", "create", "hourly-triage", "--cron", "0 * * * *", "--playbook", "triage", "--arg", "team=web", "--paused", "-o", "json")
	if sc.Name != "hourly-triage" || sc.Enabled || sc.Args["team"] != "web" {
		t.Fatalf("schedules create: %+v", sc)
	}
	if out, _ := c.run(exitOK, "schedules", "show", "hourly-triage"); !strings.Contains(out, "0 * * * *") || !strings.Contains(out, "team=web") {
		t.Fatalf("schedules show: %s", out)
	}
	c.run(exitUsage, "schedules", "create", "x", "--playbook", "triage") // --cron is required
	c.run(exitOK, "schedules", "delete", "hourly-triage")
	c.run(exitNotFound, "schedules", "show", "hourly-triage")

	// Workflows: create with a name and a JSON step, list, show, launch, delete.
	var wf studio.Workflow
	c.json(&wf, "workflows", "create", "pair", "--step", `{"playbook":"audit-repo","args":{"repo":"acme/api"}}`,
		"--step", `{"playbook":"triage","input":"the backlog","args":{"team":"api"}}`, "-o", "json")
	if wf.Name != "pair" || len(wf.Steps) != 2 || wf.Steps[1].Args["team"] != "api" || wf.Steps[1].Input != "the backlog" {
		t.Fatalf("workflows create: %+v", wf)
	}
	var wfs studio.WorkflowPage
	c.json(&wfs, "workflows", "list", "-o", "json")
	if !slices.ContainsFunc(wfs.Workflows, func(w studio.Workflow) bool { return w.ID == wf.ID }) {
		t.Fatalf("workflows list: %+v", wfs)
	}
	if out, _ := c.run(exitOK, "workflows", "show", "pair"); !strings.Contains(out, "team=api") || !strings.Contains(out, "triage") {
		t.Fatalf("workflows show: %s", out)
	}
	var launch studio.WorkflowLaunch
	c.json(&launch, "workflows", "launch", "pair", "-o", "json")
	if len(launch.Runs) != 2 || launch.Runs[0].PlaybookName != "audit-repo" {
		t.Fatalf("workflows launch: %+v", launch)
	}
	c.run(exitConflict, "workflows", "launch", "pair", "--expected-version", "7")
	c.run(exitOK, "workflows", "delete", "pair")
	c.run(exitNotFound, "workflows", "show", "pair")
	c.run(exitOK, "playbooks", "delete", "triage", "--expected-version", "2")
	c.run(exitNotFound, "playbooks", "show", "triage")

	// Audit: the server's filters.
	var audit studio.AuditPage
	c.json(&audit, "audit", "list", "--command-type", "create_workflow", "-o", "json")
	if len(audit.Events) != 1 || audit.Events[0].TargetID == nil || *audit.Events[0].TargetID != wf.ID {
		t.Fatalf("audit list --command-type create_workflow: %+v", audit)
	}
	c.json(&audit, "audit", "list", "--target", wf.ID, "--since", "1h", "-o", "json")
	if len(audit.Events) != 3 { // create, launch, delete
		t.Fatalf("audit list --target WORKFLOW --since 1h: %+v", audit)
	}
	c.json(&audit, "audit", "list", "--target", wf.ID, "--until", "1h", "-o", "json")
	if len(audit.Events) != 0 {
		t.Fatalf("audit list --until 1h: %+v", audit)
	}
	if out, _ := c.run(exitOK, "audit", "list", "--limit", "3"); !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 4 {
		t.Fatalf("audit list --limit 3:\n%s", out)
	}
	// An actor is any principal's name: one nobody has matches nothing.
	c.json(&audit, "audit", "list", "--actor", "someone", "-o", "json")
	if len(audit.Events) != 0 {
		t.Fatalf("audit list --actor someone: %+v", audit)
	}

	// Who acted: the principal whose token the client used (the data
	// directory's owner), whichever client it was — the command line or
	// another (a client without the CLI's User-Agent).
	var launched studio.Run
	c.json(&launched, "playbooks", "launch", "audit-repo", "--arg", "repo=acme/web", "-o", "json")
	byGo, err := d.client.LaunchPlaybook(testCtx(t), studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/web"}})
	if err != nil {
		t.Fatal(err)
	}
	c.json(&audit, "audit", "list", "--command-type", "launch_playbook", "-o", "json")
	actors := map[string]string{}
	for _, e := range audit.Events {
		var details struct {
			RunIDs []string `json:"run_ids"`
		}
		_ = json.Unmarshal(e.Details, &details)
		for _, id := range details.RunIDs {
			actors[id] = e.Actor
		}
	}
	if actors[launched.ID] != "owner" || actors[byGo.ID] != "owner" {
		t.Fatalf("launch actors: the CLI's run %q, the other client's %q; want the principal, owner", actors[launched.ID], actors[byGo.ID])
	}
	c.json(&audit, "audit", "list", "--actor", "owner", "--command-type", "create_workflow", "-o", "json")
	if len(audit.Events) != 1 {
		t.Fatalf("audit list --actor owner: %+v", audit)
	}
	c.run(exitUsage, "audit", "list", "--until", "yesterday")
}

// startStudio starts the binary with args and hands its stdout lines to a
// channel (closed at EOF); the process is killed at the test's end.
func startStudio(t *testing.T, env []string, args ...string) (*exec.Cmd, <-chan string, *strings.Builder) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, lines, stderr
}

// waitLine reads lines until one contains want.
func waitLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	ctx := testCtx(t)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the output ended without %q", want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-ctx.Done():
			t.Fatalf("no line with %q", want)
		}
	}
}

// TestProcessFollowRuns: runs logs -f prints a running run's output as it
// grows and ends with the run; runs list --watch prints the list again
// when a run appears, and Ctrl-C ends it cleanly.
func TestProcessFollowRuns(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// The model says something, then takes a minute: the run is running
	// with output until the test cancels it.
	script := writeScript(t, `{"turns":[{"steps":[{"text":"first part\n"},{"sleepMs":60000},{"text":"never"}]}]}`)
	d := startDaemon(t, dataDir, "--model", "script:"+script)
	env := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	ctx := testCtx(t)

	watch, pagesOut, watchErr := startStudio(t, env, "runs", "list", "--watch", "--interval", "50ms", "-o", "json")
	waitLine(t, pagesOut, `{"runs":[]}`)

	r, err := d.client.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
	if err != nil {
		t.Fatal(err)
	}
	waitLine(t, pagesOut, r.ID)

	logs, logLines, logErr := startStudio(t, env, "runs", "logs", r.ID[:8], "-f", "--interval", "50ms")
	waitLine(t, logLines, "first part")
	if _, err := d.client.CancelRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	for range logLines { // the rest, until logs exits
	}
	err = logs.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(logErr.String(), "cancelled") {
		t.Fatalf("runs logs -f of a cancelled run: %v: %s", err, logErr)
	}
	waitLine(t, pagesOut, `"status":"cancelled"`)

	if err := watch.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range pagesOut {
	}
	if err := watch.Wait(); err != nil {
		t.Fatalf("runs list --watch after Ctrl-C: %v: %s", err, watchErr)
	}
}

// TestProcessVersion: version -o json describes the binary, and a revision
// stamped at build time is the one version prints and studio_build_info
// carries.
func TestProcessVersion(t *testing.T) {
	t.Parallel()
	out, _, code := runStudio(t, nil, "version", "-o", "json")
	var v binaryVersion
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.Version == "" || v.Module != "github.com/studio/operator" ||
		v.GoVersion == "" || v.ProtocolVersion != 1 {
		t.Fatalf("version -o json: exit %d: %v: %s", code, err, out)
	}

	const rev = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "studio")
	if b, err := exec.Command("go", "build", "-ldflags", "-X main.revision="+rev, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(b), "revision "+rev) {
		t.Fatalf("version of a stamped binary: %v: %s", err, b)
	}
	dataDir := t.TempDir()
	d := spawnDaemonOf(t, bin, dataDir)
	d.ready(t)
	req, _ := http.NewRequestWithContext(testCtx(t), "GET", d.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.client.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `revision="`+rev+`"`) {
		t.Fatalf("studio_build_info lacks the revision:\n%s", regexp.MustCompile(`(?m)^studio_build_info.*$`).FindString(string(body)))
	}
}

// TestProcessDoctorDaemonDown: with no daemon answering, doctor reads the
// database but does not call the installation ok; disk space is in GiB.
func TestProcessDoctorDaemonDown(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	if out, _, code := runStudio(t, []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}, "doctor"); code != exitOK ||
		!regexp.MustCompile(`[0-9.]+ GiB free`).MatchString(out) {
		t.Fatalf("doctor, daemon up: exit %d:\n%s", code, out)
	}
	env := []string{"STUDIO_URL=http://127.0.0.1:1", "STUDIO_TOKEN=x", "STUDIO_DATA_DIR=" + dataDir}
	out, _, code := runStudio(t, env, "doctor")
	if code != exitUnreachable || strings.Contains(out, "status:     ok") || !strings.Contains(out, "status:     failing") ||
		!strings.Contains(out, "the daemon is down") {
		t.Fatalf("doctor, daemon down: exit %d:\n%s", code, out)
	}
	var rep studio.DoctorReport
	out, _, code = runStudio(t, env, "doctor", "-o", "json")
	if decodeCLIJSON(t, out, &rep); code != exitUnreachable || rep.Status != studio.StatusFailing {
		t.Fatalf("doctor -o json, daemon down: exit %d: %s", code, out)
	}
}
