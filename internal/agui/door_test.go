package agui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/agui"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/coordinator/coordtest"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

func ptr[T any](v T) *T { return &v }

// doorScript: "hello" streams two text frames and reads a playbook;
// "launch" proposes a playbook launch; "go fleet" navigates; "slow"
// pauses between its texts (the model's pace).
var doorScript = script.Script{Turns: []script.Turn{
	{Match: "hello", Steps: []script.Step{
		{Text: ptr("Hel")}, {Text: ptr("lo. ")},
		{Tool: ptr("get_playbook"), Arguments: jsontext.Value(`{"playbook":"audit-repo"}`)},
		{Text: ptr("It audits.")},
	}},
	{Match: "launch", Steps: []script.Step{
		{Text: ptr("I will propose it. ")},
		{Tool: ptr("launch_playbook"), Arguments: jsontext.Value(`{"playbook":"audit-repo","input":"repo x","args":{"repo":"x"}}`)},
		{Text: ptr("The operator decided.")},
	}},
	{Match: "go fleet", Steps: []script.Step{
		{Tool: ptr("navigate"), Arguments: jsontext.Value(`{"space":"mission","params":{"view":"fleet","status":"failed"}}`)},
		{Text: ptr("I asked the cockpit to show the failed runs.")},
	}},
	{Match: "long", Steps: []script.Step{
		{Text: ptr("first ")}, {SleepMs: ptr(int64(120_000))}, {Text: ptr("second")},
	}},
	{Match: "slow", Steps: []script.Step{
		{Text: ptr("first ")}, {SleepMs: ptr(int64(400))}, {Text: ptr("second")},
	}},
	{Steps: []script.Step{{Text: ptr("ok")}}},
}}

var principals = map[string]protocol.Principal{
	"alice": {ID: "p-alice", Name: "alice", Role: protocol.RoleOperator},
	"bob":   {ID: "p-bob", Name: "bob", Role: protocol.RoleOperator},
	"bot":   {ID: "p-bot", Name: "bot", Role: protocol.RoleAgent},
	"vera":  {ID: "p-vera", Name: "vera", Role: protocol.RoleViewer},
}

type harness struct {
	t     *testing.T
	stack *coordtest.Stack
	coord *coordinator.Coordinator
	convs *conversations.Service
	srv   *httptest.Server
	// The daemon's access changes, stood for: revoke takes every right
	// away and fires the signal.
	mu      sync.Mutex
	access  chan struct{}
	revoked bool
}

func (h *harness) accessSignal() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.access
}

func (h *harness) stillAllowed(context.Context, string, policy.Action) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.revoked {
		return protocol.Errorf(protocol.AccessRevoked, "the stream's credential was revoked")
	}
	return nil
}

func (h *harness) revoke() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked = true
	close(h.access)
	h.access = make(chan struct{})
}

// newHarness is the door on a real coordinator, SQLite file and policy;
// the daemon's authentication is stood for by a header naming one of
// principals.
func newHarness(t *testing.T, secondApprover ...string) *harness {
	t.Helper()
	stack := coordtest.New(t, coordtest.Options{Script: &doorScript})
	coord := coordinator.New(stack.Config(stack.DB))
	stack.App.SettleProposalsWith(coord)
	if err := coord.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	convs := stack.Conversations(stack.DB, coord)
	engine, err := policy.New(policy.Options{SecondApproverFor: secondApprover})
	if err != nil {
		t.Fatal(err)
	}
	gate := policy.NewGate(policy.GateConfig{Engine: engine, Logger: coordtest.Logger(), Now: stack.Clock.Now})
	h := &harness{t: t, stack: stack, coord: coord, convs: convs, access: make(chan struct{})}
	door := agui.New(agui.Config{Conversations: convs, Turns: coord, Logger: coordtest.Logger(),
		AccessSignal: h.accessSignal, StillAllowed: h.stillAllowed})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := principals[r.Header.Get("X-Principal")]
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		door.ServeHTTP(w, r.WithContext(policy.WithGate(protocol.WithPrincipal(r.Context(), p), gate)))
	}))
	t.Cleanup(func() {
		srv.Close()
		coord.Shutdown(context.Background())
	})
	h.srv = srv
	return h
}

// event is one AG-UI event as a client reads it, with its SSE id.
type event struct {
	id     string
	fields map[string]any
}

func (e event) typ() string { s, _ := e.fields["type"].(string); return s }

func (e event) str(k string) string { s, _ := e.fields[k].(string); return s }

// answer is a response: its status, its events or its typed error.
type answer struct {
	status int
	events []event
	err    protocol.Error
}

func (a answer) types() []string {
	var out []string
	for _, e := range a.events {
		out = append(out, e.typ())
	}
	return out
}

func (a answer) of(typ string) []event {
	var out []event
	for _, e := range a.events {
		if e.typ() == typ {
			out = append(out, e)
		}
	}
	return out
}

// input is a RunAgentInput.
type input map[string]any

func runInput(thread, run string, msgs ...map[string]any) input {
	if msgs == nil {
		msgs = []map[string]any{}
	}
	return input{"threadId": thread, "runId": run, "messages": msgs, "tools": []any{}, "context": []any{}, "state": map[string]any{}, "forwardedProps": map[string]any{}}
}

func user(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": text}
}

// post runs the door as who; stop, when set, ends reading at the first
// event it accepts (the client leaves).
func (h *harness) post(who string, in input, lastEventID string, stop func(event) bool) answer {
	h.t.Helper()
	b, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(h.t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Principal", who)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		var eb struct{ Error protocol.Error }
		if err := json.Unmarshal(body, &eb); err != nil {
			h.t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		a.err = eb.Error
		return a
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		h.t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var cur event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.fields); err != nil {
				h.t.Fatalf("event %s: %v", line, err)
			}
		case line == "" && cur.fields != nil:
			a.events = append(a.events, cur)
			if stop != nil && stop(cur) {
				return a
			}
			cur = event{}
		}
	}
	return a
}

// wellFormed checks what AG-UI's verifier checks of a run: RUN_STARTED
// first, one RUN_FINISHED or RUN_ERROR last, messages and tool calls
// started before their content and closed before the end.
func wellFormed(t *testing.T, a answer) {
	t.Helper()
	if len(a.events) < 2 || a.events[0].typ() != "RUN_STARTED" {
		t.Fatalf("events %v: not started", a.types())
	}
	if last := a.events[len(a.events)-1].typ(); last != "RUN_FINISHED" && last != "RUN_ERROR" {
		t.Fatalf("events %v: not ended", a.types())
	}
	open := map[string]bool{}
	for i, e := range a.events {
		if i > 0 && e.typ() == "RUN_STARTED" || i < len(a.events)-1 && (e.typ() == "RUN_FINISHED" || e.typ() == "RUN_ERROR") {
			t.Fatalf("events %v: a run boundary inside the run", a.types())
		}
		key := e.str("messageId") + e.str("toolCallId") + e.str("stepName")
		switch e.typ() {
		case "TEXT_MESSAGE_START", "TOOL_CALL_START", "STEP_STARTED":
			if open[key] {
				t.Fatalf("events %v: %s started twice", a.types(), key)
			}
			open[key] = true
		case "TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS":
			if !open[key] {
				t.Fatalf("event %d %s of %s, which is not open (%v)", i, e.typ(), key, a.types())
			}
		case "TEXT_MESSAGE_END", "TOOL_CALL_END", "STEP_FINISHED":
			if !open[key] {
				t.Fatalf("event %d %s of %s, which is not open (%v)", i, e.typ(), key, a.types())
			}
			delete(open, key)
		}
	}
	if len(open) > 0 {
		t.Fatalf("events %v: %v left open", a.types(), open)
	}
}

func text(a answer) string {
	var b strings.Builder
	for _, e := range a.of("TEXT_MESSAGE_CONTENT") {
		b.WriteString(e.str("delta"))
	}
	return b.String()
}

func outcome(t *testing.T, a answer) map[string]any {
	t.Helper()
	last := a.events[len(a.events)-1]
	o, _ := last.fields["outcome"].(map[string]any)
	if last.typ() != "RUN_FINISHED" || o == nil {
		t.Fatalf("the run ended with %v", last.fields)
	}
	return o
}

// TestRunStreamsATurn: a thread's first run creates its conversation
// (the thread id, a UUID, is the conversation's), submits the last user
// message as the turn's instruction, and streams its frames: text, a read
// tool's step, call and result, text, RUN_FINISHED success.
func TestRunStreamsATurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	a := h.post("alice", runInput(thread, "run-1", user("u1", "hello there")), "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("status %d %+v", a.status, a.err)
	}
	wellFormed(t, a)
	want := []string{"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STEP_FINISHED",
		"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"}
	if got := slices.Compact(a.types()); !slices.Equal(got, want) { // a text's frames are one content event each
		t.Fatalf("events %v\nwant   %v", a.types(), want)
	}
	if got := text(a); got != "Hello. It audits." {
		t.Fatalf("text %q", got)
	}
	if o := outcome(t, a); o["type"] != "success" {
		t.Fatalf("outcome %v", o)
	}
	if s := a.events[0]; s.str("threadId") != thread || s.str("runId") != "run-1" {
		t.Fatalf("RUN_STARTED %v", s.fields)
	}
	call := a.of("TOOL_CALL_START")[0]
	if call.str("toolCallName") != "get_playbook" || a.of("TOOL_CALL_RESULT")[0].str("toolCallId") != call.str("toolCallId") {
		t.Fatalf("tool call %v, result %v", call.fields, a.of("TOOL_CALL_RESULT")[0].fields)
	}
	// The thread is a conversation, owned by its first run's principal.
	res, err := h.convs.PolicyResource(h.t.Context(), thread)
	if err != nil || res.Owner != "alice" {
		t.Fatalf("conversation %+v, %v", res, err)
	}
	// Every frame's events end with an id: the frame's sequence.
	ids := 0
	for _, e := range a.events {
		if e.id != "" {
			ids++
		}
	}
	if ids == 0 {
		t.Fatal("no event carries an id")
	}
}

// TestThreadIdsThatAreNotUUIDs: a thread named otherwise gets a
// conversation of its own, the same on every run.
func TestThreadIdsThatAreNotUUIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.post("alice", runInput("my thread", "r1", user("u1", "hi")), "", nil)
	b := h.post("alice", runInput("my thread", "r2", user("u1", "hi"), user("u2", "again")), "", nil)
	if a.status != 200 || b.status != 200 || text(a) != "ok" || text(b) != "ok" {
		t.Fatalf("runs %d %d %q %q", a.status, b.status, text(a), text(b))
	}
	if _, err := h.convs.PolicyResource(h.t.Context(), agui.ConversationID("my thread")); err != nil {
		t.Fatal(err)
	}
}

// TestReconnectGetsTheRestWithoutGapsOrDuplicates: a run sent again with
// its id and the last event id it read gets exactly the events after it
// (what was open reopened), for every cursor; without a cursor, the whole
// run again; mid-turn, the rest as it commits.
func TestReconnectGetsTheRestWithoutGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	in := runInput(thread, "run-1", user("u1", "hello"))
	full := h.post("alice", in, "", nil)
	wellFormed(t, full)
	again := h.post("alice", in, "", nil)
	if !slices.Equal(again.types(), full.types()) || text(again) != text(full) {
		t.Fatalf("the run again: %v, first %v", again.types(), full.types())
	}
	turns := 0
	for i, e := range full.events {
		if e.id == "" {
			continue
		}
		turns++
		rest := h.post("alice", in, e.id, nil)
		wellFormed(t, rest)
		if i == len(full.events)-1 {
			// After the last event, the run's end alone.
			if !slices.Equal(rest.types(), []string{"RUN_STARTED", "RUN_FINISHED"}) {
				t.Fatalf("after the end: %v", rest.types())
			}
			continue
		}
		// The reopened starts are what was open at the cursor.
		body := rest.events[1:]
		for len(body) > 0 && (body[0].typ() == "STEP_STARTED" || body[0].typ() == "TEXT_MESSAGE_START") &&
			slices.ContainsFunc(full.events[:i+1], func(x event) bool {
				return x.typ() == body[0].typ() && x.str("messageId")+x.str("stepName") == body[0].str("messageId")+body[0].str("stepName")
			}) {
			body = body[1:]
		}
		var got, want []string
		for _, x := range body {
			b, _ := json.Marshal(x.fields)
			got = append(got, string(b))
		}
		for _, x := range full.events[i+1:] {
			b, _ := json.Marshal(x.fields)
			want = append(want, string(b))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after %s:\n got %v\nwant %v", e.id, got, want)
		}
	}
	if turns < 3 {
		t.Fatalf("only %d cursors", turns)
	}

	// Mid-turn: the client leaves after the first text, then comes back.
	in = runInput(thread, "run-2", user("u2", "slow please"))
	first := h.post("alice", in, "", func(e event) bool { return e.typ() == "TEXT_MESSAGE_CONTENT" })
	last := first.events[len(first.events)-1]
	if last.id == "" || last.str("delta") != "first " {
		t.Fatalf("first part %v (%+v)", first.types(), last)
	}
	rest := h.post("alice", in, last.id, nil)
	wellFormed(t, rest)
	if got := text(rest); got != "second" {
		t.Fatalf("the rest says %q (%v)", got, rest.types())
	}
	if rest.events[1].typ() != "TEXT_MESSAGE_START" || rest.events[1].str("messageId") != last.str("messageId") {
		t.Fatalf("the open message is not reopened: %v", rest.events[1].fields)
	}
}

// TestOpenRunEndsWhenItsRightGoes: a run under way is decided again when
// a right may have been taken away (a token revoked, a role changed, a
// conversation made private): it ends with RUN_ERROR access_revoked, and
// nothing of the turn after that is sent.
func TestOpenRunEndsWhenItsRightGoes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := runInput(uuid.NewString(), "run-1", user("u1", "long wait"))
	a := h.post("alice", in, "", func(e event) bool {
		if e.typ() == "TEXT_MESSAGE_CONTENT" {
			h.revoke()
		}
		return e.typ() == "RUN_ERROR" || e.typ() == "RUN_FINISHED"
	})
	last := a.events[len(a.events)-1]
	if last.typ() != "RUN_ERROR" || last.str("code") != string(protocol.AccessRevoked) {
		t.Fatalf("the run after its right went ended %v (%v), want RUN_ERROR access_revoked", a.types(), last.fields)
	}
	if strings.Contains(text(a), "second") {
		t.Fatalf("the run went on after its right went: %q", text(a))
	}
}

// interrupted runs "launch audit" as who and returns its interrupt.
func (h *harness) interrupted(who, thread string) (answer, map[string]any) {
	h.t.Helper()
	a := h.post(who, runInput(thread, "run-launch", user("u1", "launch audit")), "", nil)
	wellFormed(h.t, a)
	o := outcome(h.t, a)
	list, _ := o["interrupts"].([]any)
	if o["type"] != "interrupt" || len(list) != 1 {
		h.t.Fatalf("outcome %v", o)
	}
	return a, list[0].(map[string]any)
}

func resume(thread, run, id, status, decision string) input {
	in := runInput(thread, run, user("u1", "launch audit"))
	entry := map[string]any{"interruptId": id, "status": status}
	if decision != "" {
		entry["payload"] = map[string]any{"decision": decision}
	}
	in["resume"] = []any{entry}
	return in
}

// proposal is the proposal's state as the coordinator has it.
func (h *harness) proposal(convID, id string) protocol.ProposalState {
	h.t.Helper()
	p, err := h.coord.GetProposal(h.t.Context(), convID, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// TestInterruptResumedWithConfirmExecutesOnce: a proposal ends its run
// with an interrupt carrying its summary, risk, target, command hash,
// expiry and cockpit link; another operator's resume with confirm goes
// through the coordinator's confirm: the command runs, the turn goes on
// in the resuming run; the same resume sent again (a reconnect) executes
// nothing more.
func TestInterruptResumedWithConfirmExecutesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	_, it := h.interrupted("alice", thread)
	meta, _ := it["metadata"].(map[string]any)
	id, _ := it["id"].(string)
	if it["reason"] != agui.ReasonConfirmation || it["message"] == "" || it["expiresAt"] == "" || meta["risk"] != protocol.RiskExecute ||
		meta["commandHash"] == "" || meta["commandType"] != "launch_playbook" || !strings.Contains(meta["cockpitUrl"].(string), "proposal="+id) {
		t.Fatalf("interrupt %v", it)
	}
	if _, err := time.Parse(time.RFC3339Nano, it["expiresAt"].(string)); err != nil {
		t.Fatal(err)
	}
	in := resume(thread, "run-resume", id, "resolved", "confirm")
	a := h.post("bob", in, "", nil)
	if a.status != 200 {
		t.Fatalf("resume: %d %+v", a.status, a.err)
	}
	wellFormed(t, a)
	if o := outcome(t, a); o["type"] != "success" || text(a) != "The operator decided." {
		t.Fatalf("resumed run %v %q", a.types(), text(a))
	}
	var states []string
	for _, e := range a.of("ACTIVITY_SNAPSHOT") {
		states = append(states, e.fields["content"].(map[string]any)["state"].(string))
	}
	if !slices.Contains(states, "executed") {
		t.Fatalf("proposal states %v", states)
	}
	p := h.proposal(thread, id)
	if p.Status != "succeeded" || p.DecidedBy != "bob" {
		t.Fatalf("proposal %s decided by %q", p.Status, p.DecidedBy)
	}
	again := h.post("bob", in, "", nil)
	if again.status != 200 || !slices.Equal(again.types(), a.types()) {
		t.Fatalf("again: %d %v", again.status, again.types())
	}
	runs, err := h.stack.App.ListRuns(h.t.Context(), studio.RunQuery{Query: "repo x", Limit: 100})
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("the command launched %d runs (%v)", len(runs.Runs), err)
	}
}

// TestInterruptResumedWithDeny: deny (and cancelled) refuses the
// proposal; the turn goes on knowing it.
func TestInterruptResumedWithDeny(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ status, decision string }{{"resolved", "deny"}, {"cancelled", ""}} {
		h := newHarness(t)
		thread := uuid.NewString()
		_, it := h.interrupted("alice", thread)
		id := it["id"].(string)
		a := h.post("alice", resume(thread, "run-deny", id, c.status, c.decision), "", nil)
		if a.status != 200 {
			t.Fatalf("%s: %d %+v", c.status, a.status, a.err)
		}
		wellFormed(t, a)
		if p := h.proposal(thread, id); p.Status != "cancelled" {
			t.Fatalf("%s: proposal %s", c.status, p.Status)
		}
	}
}

// TestAgentTokenCannotConfirm: an agent's resume with confirm is the
// policy's denial, as at the HTTP door; the proposal stays pending.
func TestAgentTokenCannotConfirm(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	_, it := h.interrupted("bot", thread)
	id := it["id"].(string)
	a := h.post("bot", resume(thread, "run-r", id, "resolved", "confirm"), "", nil)
	if a.status != http.StatusForbidden || a.err.Code != protocol.Denied || a.err.Details["interruptId"] != id {
		t.Fatalf("agent confirm: %d %+v", a.status, a.err)
	}
	if p := h.proposal(thread, id); p.Status != "pending" {
		t.Fatalf("proposal %s", p.Status)
	}
	// A viewer does not see the thread's proposals decided either.
	if a := h.post("vera", resume(thread, "run-v", id, "resolved", "confirm"), "", nil); a.status != http.StatusForbidden {
		t.Fatalf("viewer confirm: %d %+v", a.status, a.err)
	}
}

// TestFourEyesHolds: with a second approver required, the author's own
// confirm is refused (four_eyes); another operator's goes through.
func TestFourEyesHolds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "execute")
	thread := uuid.NewString()
	_, it := h.interrupted("alice", thread)
	id := it["id"].(string)
	a := h.post("alice", resume(thread, "run-a", id, "resolved", "confirm"), "", nil)
	if a.status != http.StatusForbidden || a.err.Details["reason"] != policy.ReasonSecondApprover {
		t.Fatalf("author's confirm: %d %+v", a.status, a.err)
	}
	if b := h.post("bob", resume(thread, "run-b", id, "resolved", "confirm"), "", nil); b.status != 200 {
		t.Fatalf("bob's confirm: %d %+v", b.status, b.err)
	}
	if p := h.proposal(thread, id); p.Status != "succeeded" {
		t.Fatalf("proposal %s", p.Status)
	}
}

// TestExpiredInterruptIsRefusedAsExpired: a confirm after the proposal's
// expiry changes nothing and answers stale_context, status expired;
// answering it cancelled then goes on.
func TestExpiredInterruptIsRefusedAsExpired(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	_, it := h.interrupted("alice", thread)
	id := it["id"].(string)
	h.stack.Clock.Advance(24 * time.Hour)
	a := h.post("bob", resume(thread, "run-late", id, "resolved", "confirm"), "", nil)
	if a.status != http.StatusConflict || a.err.Code != protocol.StaleContext || a.err.Details["status"] != "expired" {
		t.Fatalf("late confirm: %d %+v", a.status, a.err)
	}
	if p := h.proposal(thread, id); p.Status != "expired" {
		t.Fatalf("proposal %s", p.Status)
	}
	b := h.post("bob", resume(thread, "run-cancel", id, "cancelled", ""), "", nil)
	if b.status != 200 {
		t.Fatalf("cancelled: %d %+v", b.status, b.err)
	}
	wellFormed(t, b)
}

// TestFrontendToolAppliedAndAcknowledged: a client that declares navigate
// gets the effect as a frontend tool call named by the effect id, pending
// at the run's end; its tool result is the effect's acknowledgement, with
// the route checked: requested is not applied until it says so.
func TestFrontendToolAppliedAndAcknowledged(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	in := runInput(thread, "run-nav", user("u1", "go fleet"))
	in["tools"] = []any{map[string]any{"name": "navigate", "description": "open a cockpit space", "parameters": map[string]any{"type": "object"}}}
	a := h.post("alice", in, "", nil)
	wellFormed(t, a)
	calls := a.of("TOOL_CALL_START")
	if len(calls) != 1 || calls[0].str("toolCallName") != "navigate" || len(a.of("TOOL_CALL_RESULT")) != 0 {
		t.Fatalf("events %v", a.types())
	}
	effectID := calls[0].str("toolCallId")
	if p, _ := outcome(t, a)["pendingToolCallIds"].([]any); len(p) != 1 || p[0] != effectID {
		t.Fatalf("pending %v", outcome(t, a))
	}
	st, err := h.coord.EffectState(h.t.Context(), thread, effectID)
	if err != nil || st.Status != "pending" {
		t.Fatalf("effect %+v %v", st, err)
	}
	// A result that does not say applied with its route is a rejection.
	msgs := []map[string]any{user("u1", "go fleet"),
		{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": effectID, "type": "function", "function": map[string]any{"name": "navigate", "arguments": "{}"}}}},
		{"id": "t1", "role": "tool", "toolCallId": effectID, "content": `{"status":"applied","clientRoute":"/?view=fleet&status=failed"}`}}
	ack := h.post("alice", runInput(thread, "run-ack", msgs...), "", nil)
	wellFormed(t, ack)
	res, _ := ack.events[len(ack.events)-1].fields["result"].(map[string]any)
	if acked, _ := res["acknowledged"].([]any); len(acked) != 1 || acked[0].(map[string]any)["status"] != "applied" {
		t.Fatalf("acknowledged %v", ack.events[len(ack.events)-1].fields)
	}
	if st, _ := h.coord.EffectState(h.t.Context(), thread, effectID); st.Status != "applied" {
		t.Fatalf("effect %s", st.Status)
	}

	// A route that is not the effect's: refused, the effect stays pending.
	b := h.post("alice", runInput(thread, "run-nav2", user("u1", "go fleet")).with("tools", in["tools"]), "", nil)
	second := b.of("TOOL_CALL_START")[0].str("toolCallId")
	msgs[1]["toolCalls"] = []any{map[string]any{"id": second, "type": "function", "function": map[string]any{"name": "navigate", "arguments": "{}"}}}
	msgs[2] = map[string]any{"id": "t2", "role": "tool", "toolCallId": second, "content": `{"status":"applied","clientRoute":"/history"}`}
	h.post("alice", runInput(thread, "run-ack2", msgs...), "", nil)
	if st, _ := h.coord.EffectState(h.t.Context(), thread, second); st.Status != "pending" {
		t.Fatalf("effect with a wrong route: %s", st.Status)
	}
	// "ok" says nothing: rejected (client_error), never applied.
	msgs[2]["content"] = "ok"
	h.post("alice", runInput(thread, "run-ack3", msgs...), "", nil)
	if st, _ := h.coord.EffectState(h.t.Context(), thread, second); st.Status != "rejected" {
		t.Fatalf("effect acknowledged with ok: %s", st.Status)
	}
}

func (in input) with(k string, v any) input { in[k] = v; return in }

// TestEffectsAsTextWithoutFrontendTools: a client that declares no effect
// tools is not offered them (the model's call is refused); one that
// declares others gets the effect in words, never applied.
func TestEffectsAsTextWithoutFrontendTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.post("alice", runInput(uuid.NewString(), "r", user("u1", "go fleet")), "", nil)
	wellFormed(t, a)
	res := a.of("TOOL_CALL_RESULT")
	if len(res) != 1 || !strings.Contains(res[0].str("content"), `"error"`) {
		t.Fatalf("events %v", a.types())
	}
	in := runInput(uuid.NewString(), "r", user("u1", "go fleet"))
	in["tools"] = []any{map[string]any{"name": "set_theme", "description": "theme"}}
	b := h.post("alice", in, "", nil)
	wellFormed(t, b)
	if !strings.Contains(text(b), "not applied here: open mission") {
		t.Fatalf("text %q", text(b))
	}
	if p := outcome(t, b)["pendingToolCallIds"]; p != nil {
		t.Fatalf("pending %v", p)
	}
}

// TestMessagesSnapshot: a run with no new message is the thread's
// history: MESSAGES_SNAPSHOT with the user's and the assistant's messages,
// the ids the runs used.
func TestMessagesSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	first := h.post("alice", runInput(thread, "r1", user("u1", "hello")), "", nil)
	a := h.post("alice", runInput(thread, "r2"), "", nil)
	wellFormed(t, a)
	if !slices.Equal(a.types(), []string{"RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"}) {
		t.Fatalf("events %v", a.types())
	}
	msgs, _ := a.events[1].fields["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if !slices.Equal(roles, []string{"user", "assistant", "assistant", "tool", "assistant"}) {
		t.Fatalf("roles %v", roles)
	}
	if msgs[1].(map[string]any)["id"] != first.of("TEXT_MESSAGE_START")[0].str("messageId") || msgs[1].(map[string]any)["content"] != "Hello. " {
		t.Fatalf("messages %v", msgs)
	}
}

// TestRefusals: bad input and hidden threads are the API's typed errors,
// before anything runs.
func TestRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	private := uuid.NewString()
	in := runInput(private, "r", user("u1", "hello"))
	in["forwardedProps"] = map[string]any{"studio": map[string]any{"visibility": "private"}}
	if a := h.post("alice", in, "", nil); a.status != 200 {
		t.Fatalf("private thread: %d %+v", a.status, a.err)
	}
	cases := []struct {
		name   string
		who    string
		in     input
		status int
		code   protocol.ErrorCode
	}{
		{"no thread id", "alice", runInput("", "r", user("u", "x")), 400, protocol.Validation},
		{"bad role", "alice", runInput("t", "r", map[string]any{"id": "x", "role": "robot", "content": "x"}), 400, protocol.Validation},
		{"image part", "alice", runInput("t", "r", map[string]any{"id": "x", "role": "user", "content": []any{map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": "x"}}}}), 400, protocol.Validation},
		{"unknown studio prop", "alice", runInput("t", "r", user("u", "x")).with("forwardedProps", map[string]any{"studio": map[string]any{"nope": 1}}), 400, protocol.Validation},
		{"another's private thread", "bob", runInput(private, "r2", user("u", "x")), 404, protocol.NotFound},
		{"a viewer converses", "vera", runInput(uuid.NewString(), "r", user("u", "x")), 403, protocol.Denied},
		{"history of no thread", "alice", runInput(uuid.NewString(), "r"), 404, protocol.NotFound},
		{"unknown interrupt", "alice", resume(private, "r3", uuid.NewString(), "resolved", "confirm"), 404, protocol.NotFound},
		{"bad decision", "alice", resume(private, "r4", uuid.NewString(), "resolved", "maybe"), 400, protocol.Validation},
	}
	for _, c := range cases {
		a := h.post(c.who, c.in, "", nil)
		if a.status != c.status || a.err.Code != c.code {
			t.Errorf("%s: %d %+v, want %d %s", c.name, a.status, a.err, c.status, c.code)
		}
	}
}

// TestEffectToolsAreTheCatalogs: the tool names a client declares are the
// operator's effect tools, one for each effect kind.
func TestEffectToolsAreTheCatalogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, kind := range []string{protocol.EffectNavigate, protocol.EffectSelect, protocol.EffectTheme, protocol.EffectPrefill} {
		spec, ok := h.coord.Tools().Lookup(agui.EffectTools[kind])
		if !ok || !spec.Class.IsEffect() {
			t.Errorf("effect %s: tool %q is not an effect tool of the catalog", kind, agui.EffectTools[kind])
		}
	}
}

// TestEveryResumeEntryIsDecidedBeforeAnyApplies: a resume whose second
// entry is refused applies none: the first proposal stays pending.
func TestEveryResumeEntryIsDecidedBeforeAnyApplies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := uuid.NewString()
	_, it := h.interrupted("alice", thread)
	id := it["id"].(string)
	in := resume(thread, "run-two", id, "resolved", "deny")
	in["resume"] = append(in["resume"].([]any), map[string]any{"interruptId": uuid.NewString(), "status": "cancelled"})
	if a := h.post("alice", in, "", nil); a.status != http.StatusNotFound {
		t.Fatalf("resume with an unknown interrupt: %d %+v", a.status, a.err)
	}
	if p := h.proposal(thread, id); p.Status != "pending" {
		t.Fatalf("proposal %s", p.Status)
	}
}
