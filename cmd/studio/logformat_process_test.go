package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// logLine is one JSON log line of the daemon, its raw text kept for messages.
type logLine struct {
	fields map[string]any
	raw    string
}

func (l logLine) msg() string   { s, _ := l.fields["msg"].(string); return s }
func (l logLine) level() string { s, _ := l.fields["level"].(string); return s }
func (l logLine) str(k string) string {
	s, _ := l.fields[k].(string)
	return s
}

// durationKey names the fields that hold a duration: they must be seconds
// (a float), never Go's raw nanoseconds.
var durationKey = regexp.MustCompile(`^time_to_|(^|_)(duration|wait|age|elapsed|lifetime|timeout|grace|renew|expiry|interval|ttl)($|_)`)

// TestProcessLogFormat runs a scripted session against a daemon logging
// JSON at debug level (a turn that proposes, the confirmation, a queued
// turn, a cancel, SSE streams opened and closed, an asset request, a
// shutdown with a turn and a playbook run in flight), parses every line it
// wrote and checks that each carries what its message needs.
func TestProcessLogFormat(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `{"turns":[{"steps":[{"text":"thinking "},{"sleepMs":600000},{"text":"never"}]}]}`)
	d := startJSONLogDaemon(t, "--log-level", "debug",
		"--workers", "1", "--shutdown-grace", "50ms", "--model", "slow", "--provider", "slow=script:"+script, "--provider", "offline=offline")
	s := d.loggedSession(t)
	d.stop(t)

	lines := d.logLines()
	lines.checkDurationsInSeconds(t)
	lines.checkTurns(t, s)
	lines.checkHTTP(t)
	lines.checkShutdown(t, s)
	if t.Failed() {
		var all strings.Builder
		for _, l := range lines {
			all.WriteString(l.raw + "\n")
		}
		t.Logf("the daemon's log:\n%s", all.String())
	}
}

// jsonLogDaemon is a `studio serve --log-format json` process whose log
// lines are collected as it writes them.
type jsonLogDaemon struct {
	ctx    context.Context
	cmd    *exec.Cmd
	exited chan struct{}
	base   string
	cl     *apiclient.Client

	mu    sync.Mutex
	lines logLines
}

// startJSONLogDaemon starts the built binary logging JSON with args, and
// waits until it serves.
func startJSONLogDaemon(t *testing.T, args ...string) *jsonLogDaemon {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	d := &jsonLogDaemon{ctx: testCtx(t), exited: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"}, args...)...)
	d.cmd.Env = append(os.Environ(), "STUDIO_TOKEN=", "STUDIO_LOG_FORMAT=", "STUDIO_LOG_LEVEL=")
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill(); <-d.exited })
	addr := make(chan string, 1)
	go func() {
		defer close(d.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := logLine{raw: sc.Text()}
			if err := json.Unmarshal(sc.Bytes(), &l.fields); err != nil {
				l.fields = nil // reported by checkDurationsInSeconds: every line must be JSON
			}
			d.mu.Lock()
			d.lines = append(d.lines, l)
			d.mu.Unlock()
			if l.msg() == "studio serving" {
				addr <- l.str("addr")
			}
		}
		_ = d.cmd.Wait()
	}()
	select {
	case d.base = <-addr:
	case <-d.exited:
		t.Fatal("the daemon exited at start")
	case <-d.ctx.Done():
		t.Fatal("the daemon did not start")
	}
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	d.cl = apiclient.New(d.base, strings.TrimSpace(string(token)), nil)
	return d
}

// stop ends the daemon with SIGTERM and waits for it to exit.
func (d *jsonLogDaemon) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-d.ctx.Done():
		t.Fatal("the daemon did not stop")
	}
}

// logLines are the lines the daemon wrote so far.
func (d *jsonLogDaemon) logLines() logLines {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.lines)
}

func (d *jsonLogDaemon) turn(t *testing.T, convID, instruction string) protocol.TurnAccepted {
	t.Helper()
	zero := int64(0)
	acc, err := d.cl.SubmitTurn(d.ctx, convID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "system", Route: "/system"}, ExpectedLastSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

func (d *jsonLogDaemon) newConv(t *testing.T, model string) string {
	t.Helper()
	c, err := d.cl.CreateConversation(d.ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if model != "" {
		if _, err := d.cl.UpdateConversation(d.ctx, c.ID, protocol.UpdateConversationRequest{Model: &model}); err != nil {
			t.Fatal(err)
		}
	}
	return c.ID
}

// untilText streams convID until an assistant text frame holding s.
func (d *jsonLogDaemon) untilText(t *testing.T, convID, s string) {
	t.Helper()
	err := d.cl.Stream(d.ctx, convID, 0, func(f protocol.Frame) error {
		if p, ok := f.Payload.(protocol.TextPayload); ok && strings.Contains(p.Content, s) {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// untilDone streams convID until its turn's done frame and returns the
// outcome.
func (d *jsonLogDaemon) untilDone(t *testing.T, convID string) protocol.Outcome {
	t.Helper()
	var out protocol.Outcome
	err := d.cl.Stream(d.ctx, convID, 0, func(f protocol.Frame) error {
		if p, ok := f.Payload.(protocol.DonePayload); ok {
			out = p.Outcome
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// loggedSession is what the session did, for the checks of its lines.
type loggedSession struct {
	confirmed, cancelled, inFlight protocol.TurnAccepted
	cancelledConv                  string
	prop                           protocol.CommandProposal
	run                            studio.Run // executing at shutdown
}

// loggedSession runs the session whose log lines the test checks: an
// asset request, a confirmed proposal, a cancelled turn, and a turn and
// a run in flight (the daemon has one worker and the slow default model).
func (d *jsonLogDaemon) loggedSession(t *testing.T) loggedSession {
	t.Helper()
	ctx, cl := d.ctx, d.cl
	var s loggedSession
	// An asset request (the cockpit loads dozens per page).
	req, _ := http.NewRequestWithContext(ctx, "GET", d.base+"/assets/none/js/app.js", nil)
	req.Header.Set("User-Agent", "logformat-test/1")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}

	// A turn that proposes (the offline model), confirmed.
	proposing := d.newConv(t, "offline")
	s.confirmed = d.turn(t, proposing, "vacuum the database")
	prop, err := awaitProposal(ctx, cl, proposing)
	if err != nil || prop.ID == "" {
		t.Fatalf("no proposal: %v", err)
	}
	s.prop = prop
	testutil.Eventually(t, func() bool {
		_, err := cl.Confirm(ctx, proposing, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash})
		if err != nil && !protocol.IsCode(err, protocol.Conflict) { // conflict: not parked yet
			t.Fatal(err)
		}
		return err == nil
	}, "the proposal confirmable")
	if out := d.untilDone(t, proposing); out != protocol.OutcomeCompleted {
		t.Fatalf("the confirmed turn ended %s", out)
	}

	// One worker: a slow turn runs, a second one queues behind it; the
	// first is cancelled by its user, the second starts and is in flight
	// at shutdown.
	cancelled, inFlight := d.newConv(t, ""), d.newConv(t, "") // the default model: slow
	s.cancelledConv = cancelled
	s.cancelled = d.turn(t, cancelled, "slow")
	d.untilText(t, cancelled, "thinking")
	s.inFlight = d.turn(t, inFlight, "slow")
	if _, err := cl.Cancel(ctx, cancelled, s.cancelled.RequestID); err != nil {
		t.Fatal(err)
	}
	if out := d.untilDone(t, cancelled); out != protocol.OutcomeCancelled {
		t.Fatalf("the cancelled turn ended %s", out)
	}
	d.untilText(t, inFlight, "thinking")
	// A playbook run (the default model: slow) executing at shutdown too.
	run, err := cl.LaunchPlaybook(ctx, studio.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, func() bool {
		if run, err = cl.GetRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		return run.Status == "running"
	}, "the run running")
	s.run = run
	return s
}

// logLines are a daemon's JSON log lines, in order.
type logLines []logLine

// find returns the lines with msg whose field k is v ("" matches any).
func (ls logLines) find(msg, k, v string) []logLine {
	var out []logLine
	for _, l := range ls {
		if l.msg() == msg && (k == "" || l.str(k) == v) {
			out = append(out, l)
		}
	}
	return out
}

// need checks that there is a line with msg and that every one has the
// fields.
func (ls logLines) need(t *testing.T, msg string, fields ...string) {
	t.Helper()
	found := ls.find(msg, "", "")
	if len(found) == 0 {
		t.Errorf("no %q line", msg)
	}
	for _, l := range found {
		for _, f := range fields {
			if v, ok := l.fields[f]; !ok || v == "" {
				t.Errorf("%q line lacks %s: %s", msg, f, l.raw)
			}
		}
	}
}

// checkDurationsInSeconds: every line is JSON, and every duration in it
// is seconds, a number.
func (ls logLines) checkDurationsInSeconds(t *testing.T) {
	t.Helper()
	for _, l := range ls {
		if l.fields == nil {
			t.Errorf("not a JSON line: %s", l.raw)
			continue
		}
		for k, v := range l.fields {
			if !durationKey.MatchString(k) {
				continue
			}
			switch v := v.(type) {
			case float64:
				if v >= 1e6 { // seconds: eleven days; nanoseconds: a millisecond
					t.Errorf("%s=%v is raw nanoseconds, not seconds: %s", k, v, l.raw)
				}
			case string:
				t.Errorf("%s=%q is a string, not seconds: %s", k, v, l.raw)
			}
		}
	}
}

// checkTurns: a turn's life (accepted, queued when it waited, started,
// each model attempt, ended) with its conversation and request; the
// decision on a proposal; a user's cancel logged as routine.
func (ls logLines) checkTurns(t *testing.T, s loggedSession) {
	t.Helper()
	turnFields := []string{"conversation", "request"}
	ls.need(t, "turn accepted", turnFields...)
	ls.need(t, "turn queued", turnFields...)
	ls.need(t, "turn started", append(turnFields, "queue_wait")...)
	ls.need(t, "model attempt", append(turnFields, "model", "attempt", "duration")...)
	ls.need(t, "turn ended", append(turnFields, "outcome", "duration")...)
	for _, acc := range []protocol.TurnAccepted{s.confirmed, s.cancelled, s.inFlight} {
		for _, msg := range []string{"turn accepted", "turn started", "model attempt"} {
			if len(ls.find(msg, "request", acc.RequestID)) == 0 {
				t.Errorf("no %q line for request %s", msg, acc.RequestID)
			}
		}
	}
	if len(ls.find("turn queued", "request", s.inFlight.RequestID)) == 0 {
		t.Errorf("the turn that waited for the worker has no \"turn queued\" line")
	}
	ls.need(t, "proposal decided", "proposal", "conversation", "request", "decision")
	if len(ls.find("proposal decided", "proposal", s.prop.ID)) == 0 {
		t.Errorf("no \"proposal decided\" line for proposal %s", s.prop.ID)
	}
	// A user's cancel is routine: INFO, never WARN or ERROR.
	for _, l := range ls {
		if (l.level() == "WARN" || l.level() == "ERROR") && (l.str("request") == s.cancelled.RequestID || l.str("conversation") == s.cancelledConv) {
			t.Errorf("the user's cancel logged at %s: %s", l.level(), l.raw)
		}
	}
	if ended := ls.find("turn ended", "request", s.cancelled.RequestID); len(ended) != 1 || ended[0].str("outcome") != "cancelled" || ended[0].level() != "INFO" {
		t.Errorf("the cancelled turn's end: %v", ended)
	}
}

// checkHTTP: SSE streams are logged at close with how long, how many
// frames and why; request lines say who asked, assets at DEBUG.
func (ls logLines) checkHTTP(t *testing.T) {
	t.Helper()
	ls.need(t, "stream closed", "conversation", "duration", "frames", "reason")
	for _, l := range ls.find("stream closed", "", "") {
		if _, ok := l.fields["frames"].(float64); !ok {
			t.Errorf("stream closed: frames is not a number: %s", l.raw)
		}
	}
	ls.need(t, "http request", "method", "route", "status", "duration", "remote", "user_agent", "request_id")
	assets := 0
	for _, l := range ls.find("http request", "", "") {
		if strings.HasPrefix(l.str("path"), "/assets/") {
			assets++
			if l.level() != "DEBUG" {
				t.Errorf("an asset request logged at %s: %s", l.level(), l.raw)
			}
		}
		if strings.HasPrefix(l.str("route"), l.str("method")+" ") {
			t.Errorf("the route repeats the method: %s", l.raw)
		}
	}
	if assets == 0 {
		t.Errorf("no asset request line")
	}
}

// checkShutdown: the shutdown says what becomes of the turn and the run
// in flight.
func (ls logLines) checkShutdown(t *testing.T, s loggedSession) {
	t.Helper()
	shutdown := -1
	for i, l := range ls {
		if l.msg() == "shutting down" {
			shutdown = i
		}
	}
	if shutdown < 0 {
		t.Errorf("no \"shutting down\" line")
		return
	}
	if _, ok := ls[shutdown].fields["turns_in_flight"]; !ok {
		t.Errorf("\"shutting down\" does not say how many turns are in flight: %s", ls[shutdown].raw)
	}
	var fate []string
	for _, l := range ls[shutdown:] {
		if l.str("request") == s.inFlight.RequestID {
			fate = append(fate, fmt.Sprintf("%s %s", l.msg(), l.str("outcome")))
		}
	}
	if !strings.Contains(strings.Join(fate, "; "), "turn interrupted by shutdown") {
		t.Errorf("after \"shutting down\" the turn in flight has %q, want a \"turn interrupted by shutdown\" line", fate)
	}
	if n, _ := ls[shutdown].fields["runs_in_flight"].(float64); n != 1 {
		t.Errorf("\"shutting down\" does not count the run in flight: %s", ls[shutdown].raw)
	}
	if len(ls.find("run interrupted by shutdown", "run", s.run.ID)) != 1 {
		t.Errorf("the run in flight at shutdown has no \"run interrupted by shutdown\" line")
	}
}
