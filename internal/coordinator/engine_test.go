package coordinator_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model/openai"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/turnstats"
)

// hungServer accepts connections and never answers: a model provider that
// hangs. Requests counts the attempts; release lets the handlers go.
type hungServer struct {
	*httptest.Server
	requests atomic.Int32
	release  chan struct{}
}

func newHungServer(t *testing.T) *hungServer {
	h := &hungServer{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		select {
		case <-r.Context().Done():
		case <-h.release:
		}
	}))
	t.Cleanup(func() {
		close(h.release)
		h.Close()
	})
	return h
}

// recorder is an Observer that keeps what it is told.
type recorder struct {
	coordinator.NopObserver
	mu    sync.Mutex
	model []coordinator.ModelAttempt
	ended []coordinator.TurnEnded
}

func (r *recorder) ModelAttempt(a coordinator.ModelAttempt) {
	r.mu.Lock()
	r.model = append(r.model, a)
	r.mu.Unlock()
}

func (r *recorder) TurnEnded(te coordinator.TurnEnded) {
	r.mu.Lock()
	r.ended = append(r.ended, te)
	r.mu.Unlock()
}

func (r *recorder) turns() []coordinator.TurnEnded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ended)
}

func (r *recorder) attempts() []coordinator.ModelAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.model)
}

// A provider that accepts the connection and never answers. The
// first-event deadline ends each attempt with a retryable model_failure,
// retried under the usual rules, then the turn fails and frees its worker:
// a turn queued behind it runs.
func TestHungProviderDeadline(t *testing.T) {
	t.Parallel()
	srv := newHungServer(t)
	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recorder{}
	e := newEngine(t, engineOpts{provider: p, workers: 1, tweak: func(c *coordinator.Config) {
		c.FirstEventTimeout, c.IdleTimeout, c.AttemptTimeout = 50*time.Millisecond, 50*time.Millisecond, time.Second
		c.ModelRetries = 2
		c.Observer = obs
	}})
	conv := e.conversation()
	acc := e.submit(conv, "hello")
	other := e.conversation()
	queued := e.submit(other, "hello too")

	frames := e.waitDone(conv, acc.RequestID)
	k := kinds(frames)
	if !slices.Equal(k[len(k)-2:], []string{"error:model_failure", "done:failed"}) {
		t.Fatalf("frames %v", k)
	}
	errFrame := frames[len(frames)-2].Payload.(protocol.ErrorPayload).Error
	if !errFrame.Retryable || !strings.Contains(errFrame.Message, "sent nothing within 50ms") {
		t.Fatalf("error %+v", errFrame)
	}
	// The queued turn got the worker, and hung the same way.
	second := e.waitDone(other, queued.RequestID)
	if k := kinds(second); !slices.Equal(k[len(k)-2:], []string{"error:model_failure", "done:failed"}) {
		t.Fatalf("second turn %v", k)
	}
	attempts := obs.attempts()
	var retried []bool
	for _, a := range attempts {
		if a.ErrorCode != protocol.ModelFailure || a.Model != "openai" {
			t.Fatalf("attempt %+v", a)
		}
		retried = append(retried, a.Retried)
	}
	if !slices.Equal(retried, []bool{true, true, false, true, true, false}) {
		t.Fatalf("attempts retried %v, want three per turn", retried)
	}
}

// The idle deadline: a stream that stops after some text ends its attempt;
// text was shown, so it is not retried.
func TestIdleDeadlineAfterText(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"par"},"finish_reason":null}]}` + "\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, engineOpts{provider: p, tweak: func(c *coordinator.Config) {
		c.FirstEventTimeout, c.IdleTimeout, c.AttemptTimeout = 5*time.Second, 50*time.Millisecond, 10*time.Second
	}})
	conv := e.conversation()
	acc := e.submit(conv, "hello")
	frames := e.waitDone(conv, acc.RequestID)
	k := kinds(frames)
	if !slices.Equal(k, []string{"text", "text", "error:model_failure", "done:failed"}) {
		t.Fatalf("frames %v", k)
	}
	if msg := frames[2].Payload.(protocol.ErrorPayload).Error.Message; !strings.Contains(msg, "stopped streaming for 50ms") {
		t.Fatalf("error %q", msg)
	}
}

// Admission control: with the queue bound at N and every
// worker busy, N+5 submissions across conversations leave 5 refused with
// rate_limited and retryAfterMs, and nothing of them created.
func TestQueueBoundRefusesTurns(t *testing.T) {
	t.Parallel()
	const bound = 4
	e := newEngine(t, engineOpts{script: &toggleScript, workers: 1, tweak: func(c *coordinator.Config) {
		c.MaxQueuedTurns = bound
	}})
	busy := e.conversation()
	blocker := e.submit(busy, "block")
	e.waitTurn(blocker.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })

	var refused []*protocol.Error
	var refusedConvs []string
	var accepted []protocol.TurnAccepted
	for range bound + 5 {
		conv := e.conversation()
		acc, err := e.trySubmit(conv, "hello")
		if err != nil {
			pe := protocol.ErrorOf(err)
			if pe.Code != protocol.RateLimited || !pe.Retryable || pe.RetryAfterMs <= 0 {
				t.Fatalf("refusal %+v", pe)
			}
			refused = append(refused, pe)
			refusedConvs = append(refusedConvs, conv)
			continue
		}
		accepted = append(accepted, acc)
	}
	if len(refused) != 5 || len(accepted) != bound {
		t.Fatalf("%d refused, %d accepted", len(refused), len(accepted))
	}
	for _, conv := range refusedConvs {
		if fs := e.frames(conv); len(fs) != 0 {
			t.Fatalf("a refused submission left %d frames", len(fs))
		}
		if c, _ := e.db.GetConversation(e.ctx(), conv); c.ActiveRequestID != nil {
			t.Fatal("a refused submission claimed the conversation")
		}
	}
	if d := e.coord.QueueDepth(); d != bound {
		t.Fatalf("queue depth %d", d)
	}
	// A cancel frees a place at once, and the queue drains once the
	// worker is free.
	if _, err := e.coord.CancelTurn(e.ctx(), accepted[0].ConversationID, accepted[0].RequestID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.trySubmit(refusedConvs[0], "hello"); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	if _, err := e.coord.CancelTurn(e.ctx(), busy, blocker.RequestID); err != nil {
		t.Fatal(err)
	}
	for _, acc := range accepted {
		e.waitDone(acc.ConversationID, acc.RequestID)
	}
}

// proposals returns the stored proposals of a request, oldest first.
func (e *engine) proposals(requestID string) []store.Proposal {
	e.t.Helper()
	ps, err := e.db.ListProposals(e.ctx(), store.ListProposalsParams{RequestID: requestID, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Reverse(ps)
	return ps
}

// denyEach denies every proposal of the turn as it comes, until the turn ends.
func (e *engine) denyEach(convID, requestID string) []protocol.Frame {
	e.t.Helper()
	denied := map[string]bool{}
	for {
		var open string
		fs := e.waitFor(convID, "a proposal or the end", func(fs []protocol.Frame) bool {
			open = ""
			for _, f := range ofRequest(fs, requestID) {
				if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired && !denied[c.ProposalID] {
					open = c.ProposalID
				}
			}
			return open != "" || countDone(fs, requestID) > 0
		})
		if open == "" {
			return ofRequest(fs, requestID)
		}
		denied[open] = true
		if _, err := e.coord.Deny(e.ctx(), convID, open); err != nil {
			e.t.Fatal(err)
		}
	}
}

func toolStep(name, args string) script.Step {
	return script.Step{Tool: ptr(name), Arguments: jsontext.Value(args)}
}

// Rounds are counted per turn, not per continuation after a
// decision, and proposals per turn are capped; past a limit the turn ends
// failed and says which limit.
func TestLimitsPerTurn(t *testing.T) {
	t.Parallel()
	var rounds, proposals []script.Step
	for i := range 12 {
		rounds = append(rounds, toolStep("no_such_tool", `{}`), toolStep("delete_schedule", `{"schedule":"nightly-audit"}`))
		proposals = append(proposals, toolStep("create_playbook", `{"name":"p`+string(rune('a'+i))+`","prompt":"x"}`))
	}
	s := script.Script{Turns: []script.Turn{{Match: "rounds", Steps: rounds}, {Match: "proposals", Steps: proposals}}}
	// The same command denied again and again: the denial memory would
	// refuse the repeats before the cap counts them.
	e := newEngine(t, engineOpts{script: &s, tweak: func(c *coordinator.Config) { c.MaxProposalsPerTurn, c.DenialMemory = 10, -1 }})

	conv := e.conversation()
	acc := e.submit(conv, "rounds")
	frames := e.denyEach(conv, acc.RequestID)
	last := frames[len(frames)-2].Payload.(protocol.ErrorPayload).Error
	if last.Code != protocol.ModelFailure || last.Details["limit"] != "rounds_per_turn" {
		t.Fatalf("ended with %+v: %v", last, kinds(frames))
	}
	calls := 0
	for _, f := range frames {
		if f.Type == protocol.FrameToolCall {
			calls++
		}
	}
	if calls != coordinator.DefaultMaxToolRounds || len(e.proposals(acc.RequestID)) != coordinator.DefaultMaxToolRounds/2 {
		t.Fatalf("%d tool calls and %d proposals in one turn", calls, len(e.proposals(acc.RequestID)))
	}

	e2 := newEngine(t, engineOpts{script: &s})
	conv = e2.conversation()
	acc = e2.submit(conv, "proposals")
	frames = e2.denyEach(conv, acc.RequestID)
	last = frames[len(frames)-2].Payload.(protocol.ErrorPayload).Error
	if last.Details["limit"] != "proposals_per_turn" || len(e2.proposals(acc.RequestID)) != coordinator.DefaultMaxProposalsPerTurn {
		t.Fatalf("ended with %+v after %d proposals", last, len(e2.proposals(acc.RequestID)))
	}
}

// A command the model cannot run becomes the tool's validation or
// not_found result, never a proposal a human confirms in vain.
func TestInvalidCommandsNeverBecomeProposals(t *testing.T) {
	t.Parallel()
	s := script.Script{Turns: []script.Turn{{Steps: []script.Step{
		toolStep("launch_playbook", `{"playbook":"audit-repo","args":{"repo":"x","nope":"y"}}`),
		toolStep("launch_playbook", `{"playbook":"no-such-playbook"}`),
		toolStep("run_maintenance", `{"action":"purge_frames","conversationId":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1","beforeSequence":2}`),
		toolStep("get_playbook", `{"playbook":"https://evil.example/x"}`),
		{Text: ptr("done")},
	}}}}
	e := newEngine(t, engineOpts{script: &s})
	conv := e.conversation()
	acc := e.submit(conv, "go")
	frames := e.waitDone(conv, acc.RequestID)
	var codes []protocol.ErrorCode
	for _, f := range frames {
		if r, ok := f.Payload.(protocol.ToolResultPayload); ok {
			if r.OK {
				t.Fatalf("tool result ok: %+v", r)
			}
			codes = append(codes, r.Error.Code)
		}
	}
	want := []protocol.ErrorCode{protocol.Validation, protocol.NotFound, protocol.NotFound, protocol.Validation}
	if !slices.Equal(codes, want) || len(e.proposals(acc.RequestID)) != 0 {
		t.Fatalf("results %v, %d proposals: %v", codes, len(e.proposals(acc.RequestID)), kinds(frames))
	}
}

// ExpectedTargetVersion is optional; omitted, it is the version
// the proposal was made for, and the target is still re-read.
func TestConfirmWithoutTargetVersion(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash})
	if err != nil || res.Status != protocol.ResultSucceeded || !e.schedule().Enabled {
		t.Fatalf("confirm without version: %+v %v", res, err)
	}
	e.waitDone(conv, acc.RequestID)

	// The target changed since: conflict, nothing executed. (Enabling an
	// enabled schedule is no proposal at all, so it is paused first.)
	sc := e.schedule()
	if _, err := e.app.Execute(e.ctx(), appDisable(sc.Name), appManual()); err != nil {
		t.Fatal(err)
	}
	acc, prop = e.toggle(conv)
	if _, err := e.app.Execute(e.ctx(), studio.UpdateScheduleCommand{Schedule: sc.Name, ExpectedVersion: int64(e.schedule().Version),
		Input: ptr("changed")}, appManual()); err != nil {
		t.Fatal(err)
	}
	res, err = e.coord.Confirm(e.ctx(), conv, prop.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: prop.CommandHash})
	if err != nil || res.Status != protocol.ResultConflict || res.Error.Code != protocol.StaleContext || e.schedule().Enabled {
		t.Fatalf("confirm of a changed target: %+v %v", res, err)
	}
	e.waitDone(conv, acc.RequestID)
}

// Reads only read: a due proposal stays pending under reads,
// and a confirm refuses and expires it.
func TestReadsDoNotExpire(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	e.clock.Advance(11 * time.Minute)
	for range 2 {
		if p, err := e.coord.GetProposal(e.ctx(), conv, prop.ID); err != nil || p.Status != "pending" {
			t.Fatalf("read: %+v %v", p.Status, err)
		}
		if ps, err := e.coord.ListProposals(e.ctx(), coordinator.ProposalQuery{Status: "pending"}); err != nil || len(ps) != 1 {
			t.Fatalf("list: %d %v", len(ps), err)
		}
	}
	if d := e.decisions(prop.ID); len(d) != 0 {
		t.Fatalf("reads wrote audit rows %v", d)
	}
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultExpired || e.schedule().Enabled {
		t.Fatalf("confirm of a due proposal: %+v %v", res, err)
	}
	// A deny of it now is conflict, like any deny of a settled proposal.
	if _, err := e.coord.Deny(e.ctx(), conv, prop.ID); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("deny of an expired proposal: %v", err)
	}
	frames := e.waitDone(conv, acc.RequestID)
	if !slices.Contains(kinds(frames), "confirmation:expired") {
		t.Fatalf("frames %v", kinds(frames))
	}
}

// The sweeper expires due proposals; the turn continues with the outcome.
func TestSweeperExpires(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{tweak: func(c *coordinator.Config) { c.SweepInterval = time.Millisecond }})
	e.clock.Advance(10 * time.Minute)
	frames := e.waitDone(conv, acc.RequestID)
	if !slices.Contains(kinds(frames), "confirmation:expired") || !slices.Equal(e.decisions(prop.ID), []string{"expired"}) {
		t.Fatalf("frames %v audit %v", kinds(frames), e.decisions(prop.ID))
	}
}

// A restart keeps a parked turn's proposal confirmable; the new daemon's
// owner executes it once and the turn continues.
func TestRestartKeepsParkedTurn(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	e.coord.Shutdown(context.Background())
	if _, err := e.trySubmit(e.conversation(), "x"); !protocol.IsCode(err, protocol.ServiceFailure) {
		t.Fatalf("submit during shutdown: %v", err)
	}
	next := coordinator.New(e.cfg)
	e.app.SettleProposalsWith(next)
	t.Cleanup(func() { next.Shutdown(context.Background()) })
	if err := next.Recover(e.ctx()); err != nil {
		t.Fatal(err)
	}
	res, err := next.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm after restart: %+v %v", res, err)
	}
	frames := e.waitDone(conv, acc.RequestID)
	if k := kinds(frames); !slices.Equal(k[len(k)-4:], []string{"confirmation:executed", "tool_result", "text", "done:completed"}) {
		t.Fatalf("frames %v", k)
	}
}

// Twenty concurrent confirms execute once; every caller gets the result.
func TestConcurrentConfirmsExecuteOnce(t *testing.T) {
	t.Parallel()
	e, conv, acc, prop := newToggled(t, engineOpts{})
	var wg sync.WaitGroup
	results := make([]protocol.ProposalResult, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() { results[i], errs[i] = e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop)) })
	}
	wg.Wait()
	for i := range 20 {
		if errs[i] != nil || results[i].Status != protocol.ResultSucceeded {
			t.Fatalf("caller %d: %+v %v", i, results[i], errs[i])
		}
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}

// Turns that start-up recovery ends (a previous process left them queued
// or running) reach the Observer: failed, service_restarted, without a
// duration, which would span the restart.
func TestRecoveryReportsTheTurnsItEnds(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{})
	storetest.ActiveTurns(t, e.db, 2, e.clock.Now())
	recent := turnstats.New(16, e.clock.Now)
	cfg := e.cfg
	cfg.Observer = recent
	next := coordinator.New(cfg)
	t.Cleanup(func() { next.Shutdown(context.Background()) })
	if err := next.Recover(e.ctx()); err != nil {
		t.Fatal(err)
	}
	b := recent.Activity(1, time.Hour).Buckets[0]
	if b.Turns != 2 || b.Failed != 2 || b.MedianMs != nil {
		t.Fatalf("after recovery the observer saw %d turns, %d failed, median %v; want 2, 2, none", b.Turns, b.Failed, b.MedianMs)
	}
}

// A tool's error quotes what it was given; a secret in it (a token the
// model pasted as a name) reaches the frames neither in the call's
// arguments nor in its error (docs/design.md §16).
func TestToolErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	s := script.Script{Turns: []script.Turn{{Steps: []script.Step{
		toolStep("get_playbook", `{"playbook":"`+token+`"}`),
		toolStep("get_run", `{"run":"password=hunter2"}`),
		{Text: ptr("done")},
	}}}}
	e := newEngine(t, engineOpts{script: &s})
	conv := e.conversation()
	acc := e.submit(conv, "go")
	var results int
	for _, f := range e.waitDone(conv, acc.RequestID) {
		if c, ok := f.Payload.(protocol.ToolCallPayload); ok {
			if strings.Contains(string(c.Arguments), token) || strings.Contains(string(c.Arguments), "hunter2") {
				t.Fatalf("tool call frame: %s", c.Arguments)
			}
			continue
		}
		r, ok := f.Payload.(protocol.ToolResultPayload)
		if !ok {
			continue
		}
		results++
		b, err := protocol.Marshal(r.Error)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK || strings.Contains(string(b), token) || strings.Contains(string(b), "hunter2") {
			t.Fatalf("tool error frame: %s", b)
		}
	}
	if results != 2 {
		t.Fatalf("%d tool results, want 2", results)
	}
}
