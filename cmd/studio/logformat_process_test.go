package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
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
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	script := writeScript(t, `{"turns":[{"steps":[{"text":"thinking"},{"sleepMs":600000},{"text":"never"}]}]}`)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json", "--log-level", "debug",
		"--workers", "1", "--shutdown-grace", "50ms", "--model", "slow", "--provider", "slow=script:"+script, "--provider", "offline=offline")
	cmd.Env = append(os.Environ(), "STUDIO_TOKEN=", "STUDIO_LOG_FORMAT=", "STUDIO_LOG_LEVEL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var mu sync.Mutex
	var lines []logLine
	addr := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := logLine{raw: sc.Text()}
			if err := json.Unmarshal(sc.Bytes(), &l.fields); err != nil {
				l.fields = nil // reported below: every line must be JSON
			}
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
			if l.msg() == "studio serving" {
				addr <- l.str("addr")
			}
		}
		_ = cmd.Wait()
	}()
	ctx := testCtx(t)
	var base string
	select {
	case base = <-addr:
	case <-exited:
		t.Fatal("the daemon exited at start")
	case <-ctx.Done():
		t.Fatal("the daemon did not start")
	}
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	cl := httpapi.NewClient(base, strings.TrimSpace(string(token)), nil)
	zero := int64(0)
	turn := func(convID, instruction string) protocol.TurnAccepted {
		t.Helper()
		acc, err := cl.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: instruction,
			Context: protocol.ContextSnapshot{Space: "system", Route: "/system"}, ExpectedLastSequence: &zero})
		if err != nil {
			t.Fatal(err)
		}
		return acc
	}
	newConv := func(model string) string {
		t.Helper()
		c, err := cl.CreateConversation(ctx, protocol.CreateConversationRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if model != "" {
			if _, err := cl.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Model: &model}); err != nil {
				t.Fatal(err)
			}
		}
		return c.ID
	}
	// untilText streams convID until an assistant text frame holding s.
	untilText := func(convID, s string) {
		t.Helper()
		err := cl.Stream(ctx, convID, 0, func(f protocol.Frame) error {
			if p, ok := f.Payload.(protocol.TextPayload); ok && strings.Contains(p.Content, s) {
				return httpapi.ErrStopStream
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	untilDone := func(convID string) protocol.Outcome {
		t.Helper()
		var out protocol.Outcome
		err := cl.Stream(ctx, convID, 0, func(f protocol.Frame) error {
			if p, ok := f.Payload.(protocol.DonePayload); ok {
				out = p.Outcome
				return httpapi.ErrStopStream
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// An asset request (the cockpit loads dozens per page).
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/assets/none/js/app.js", nil)
	req.Header.Set("User-Agent", "logformat-test/1")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}

	// A turn that proposes (the offline model), confirmed.
	proposing := newConv("offline")
	acc1 := turn(proposing, "vacuum the database")
	prop, err := awaitProposal(ctx, cl, proposing)
	if err != nil || prop.ID == "" {
		t.Fatalf("no proposal: %v", err)
	}
	for {
		if _, err := cl.Confirm(ctx, proposing, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash}); err == nil {
			break
		} else if !protocol.IsCode(err, protocol.Conflict) { // not parked yet
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the proposal never became confirmable")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if out := untilDone(proposing); out != protocol.OutcomeCompleted {
		t.Fatalf("the confirmed turn ended %s", out)
	}

	// One worker: a slow turn runs, a second one queues behind it; the
	// first is cancelled by its user, the second starts and is in flight
	// at shutdown.
	cancelled, inFlight := newConv(""), newConv("") // the default model: slow
	acc2 := turn(cancelled, "slow")
	untilText(cancelled, "thinking")
	acc3 := turn(inFlight, "slow")
	if _, err := cl.Cancel(ctx, cancelled, acc2.RequestID); err != nil {
		t.Fatal(err)
	}
	if out := untilDone(cancelled); out != protocol.OutcomeCancelled {
		t.Fatalf("the cancelled turn ended %s", out)
	}
	untilText(inFlight, "thinking")
	// A playbook run (the default model: slow) executing at shutdown too.
	run, err := cl.LaunchPlaybook(ctx, app.LaunchPlaybookCommand{Playbook: "audit-repo", Args: map[string]string{"repo": "acme/api"}})
	if err != nil {
		t.Fatal(err)
	}
	for run.Status != "running" {
		select {
		case <-ctx.Done():
			t.Fatalf("the run never started: %+v", run)
		case <-time.After(10 * time.Millisecond):
		}
		if run, err = cl.GetRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("the daemon did not stop")
	}

	mu.Lock()
	defer mu.Unlock()
	var all strings.Builder
	for _, l := range lines {
		all.WriteString(l.raw + "\n")
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
	}
	// find returns the lines with msg whose field k is v ("" matches any).
	find := func(msg, k, v string) []logLine {
		var out []logLine
		for _, l := range lines {
			if l.msg() == msg && (k == "" || l.str(k) == v) {
				out = append(out, l)
			}
		}
		return out
	}
	// need checks that every line with msg has the fields.
	need := func(msg string, fields ...string) {
		t.Helper()
		ls := find(msg, "", "")
		if len(ls) == 0 {
			fail("no %q line", msg)
		}
		for _, l := range ls {
			for _, f := range fields {
				if v, ok := l.fields[f]; !ok || v == "" {
					fail("%q line lacks %s: %s", msg, f, l.raw)
				}
			}
		}
	}
	for _, l := range lines {
		if l.fields == nil {
			fail("not a JSON line: %s", l.raw)
			continue
		}
		for k, v := range l.fields {
			if !durationKey.MatchString(k) {
				continue
			}
			switch v := v.(type) {
			case float64:
				if v >= 1e6 { // seconds: eleven days; nanoseconds: a millisecond
					fail("%s=%v is raw nanoseconds, not seconds: %s", k, v, l.raw)
				}
			case string:
				fail("%s=%q is a string, not seconds: %s", k, v, l.raw)
			}
		}
	}

	// A turn's life: accepted, queued (when it waited), started, each
	// model attempt, ended; with its conversation and request.
	turnFields := []string{"conversation", "request"}
	need("turn accepted", turnFields...)
	need("turn queued", turnFields...)
	need("turn started", append(turnFields, "queue_wait")...)
	need("model attempt", append(turnFields, "model", "attempt", "duration")...)
	need("turn ended", append(turnFields, "outcome", "duration")...)
	for _, acc := range []protocol.TurnAccepted{acc1, acc2, acc3} {
		for _, msg := range []string{"turn accepted", "turn started", "model attempt"} {
			if len(find(msg, "request", acc.RequestID)) == 0 {
				fail("no %q line for request %s", msg, acc.RequestID)
			}
		}
	}
	if len(find("turn queued", "request", acc3.RequestID)) == 0 {
		fail("the turn that waited for the worker has no \"turn queued\" line")
	}
	need("proposal decided", "proposal", "conversation", "request", "decision")
	if len(find("proposal decided", "proposal", prop.ID)) == 0 {
		fail("no \"proposal decided\" line for proposal %s", prop.ID)
	}
	// SSE streams: logged at close with how long, how many frames and why.
	need("stream closed", "conversation", "duration", "frames", "reason")
	for _, l := range find("stream closed", "", "") {
		if _, ok := l.fields["frames"].(float64); !ok {
			fail("stream closed: frames is not a number: %s", l.raw)
		}
	}
	// Request lines: who asked; assets at DEBUG.
	need("http request", "method", "route", "status", "duration", "remote", "user_agent", "request_id")
	assets := 0
	for _, l := range find("http request", "", "") {
		if strings.HasPrefix(l.str("path"), "/assets/") {
			assets++
			if l.level() != "DEBUG" {
				fail("an asset request logged at %s: %s", l.level(), l.raw)
			}
		}
		if strings.HasPrefix(l.str("route"), l.str("method")+" ") {
			fail("the route repeats the method: %s", l.raw)
		}
	}
	if assets == 0 {
		fail("no asset request line")
	}
	// A user's cancel is routine: INFO, never WARN or ERROR.
	for _, l := range lines {
		if (l.level() == "WARN" || l.level() == "ERROR") && (l.str("request") == acc2.RequestID || l.str("conversation") == cancelled) {
			fail("the user's cancel logged at %s: %s", l.level(), l.raw)
		}
	}
	if ended := find("turn ended", "request", acc2.RequestID); len(ended) != 1 || ended[0].str("outcome") != "cancelled" || ended[0].level() != "INFO" {
		fail("the cancelled turn's end: %v", ended)
	}
	// The shutdown says what becomes of the turn in flight.
	shutdown := -1
	for i, l := range lines {
		if l.msg() == "shutting down" {
			shutdown = i
		}
	}
	if shutdown < 0 {
		fail("no \"shutting down\" line")
	} else {
		if _, ok := lines[shutdown].fields["turns_in_flight"]; !ok {
			fail("\"shutting down\" does not say how many turns are in flight: %s", lines[shutdown].raw)
		}
		var fate []string
		for _, l := range lines[shutdown:] {
			if l.str("request") == acc3.RequestID {
				fate = append(fate, fmt.Sprintf("%s %s", l.msg(), l.str("outcome")))
			}
		}
		if !strings.Contains(strings.Join(fate, "; "), "turn interrupted by shutdown") {
			fail("after \"shutting down\" the turn in flight has %q, want a \"turn interrupted by shutdown\" line", fate)
		}
		if n, _ := lines[shutdown].fields["runs_in_flight"].(float64); n != 1 {
			fail("\"shutting down\" does not count the run in flight: %s", lines[shutdown].raw)
		}
		if len(find("run interrupted by shutdown", "run", run.ID)) != 1 {
			fail("the run in flight at shutdown has no \"run interrupted by shutdown\" line")
		}
	}
	if t.Failed() {
		t.Logf("the daemon's log:\n%s", all.String())
	}
}
