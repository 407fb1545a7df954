package httpapi_test

import (
	"database/sql"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// proposalScript: "launch" proposes launching audit-repo, then reports.
var proposalScript = script.Script{Turns: []script.Turn{
	{Match: "launch", Steps: []script.Step{
		{Text: ptr("I will propose it. ")},
		{Tool: ptr("launch_playbook"), Arguments: jsontext.Value(`{"playbook":"audit-repo","input":"repo x","args":{"repo":"x"}}`)},
		{Text: ptr("The operator decided.")},
	}},
	{Match: "mixed", Steps: []script.Step{
		{Tool: ptr("no_such_tool"), Arguments: jsontext.Value(`{}`)},
		{Tool: ptr("get_playbook"), Arguments: jsontext.Value(`{"playbook":"https://evil.example/x"}`)},
		{Tool: ptr("delete_playbook"), Arguments: jsontext.Value(`{"playbook":"audit-repo","expectedVersion":1}`)},
		{Text: ptr("after")},
	}},
	{Steps: []script.Step{{Text: ptr("ok")}}},
}}

// proposed submits "launch" and waits for the confirmation(required) frame.
// The instruction names the playbook: a person asking for the command again
// lifts the memory of their earlier denial of it.
func (h *harness) proposed(convID string) (protocol.TurnAccepted, protocol.CommandProposal) {
	h.t.Helper()
	acc := h.submit(convID, "launch audit-repo")
	var prop protocol.CommandProposal
	h.until(convID, acc.AcceptedSequence-1, func(f protocol.Frame) bool {
		if p, ok := f.Payload.(protocol.ProposalPayload); ok {
			prop = p.Proposal
		}
		c, ok := f.Payload.(protocol.ConfirmationPayload)
		return ok && c.State == protocol.ConfirmationRequired
	})
	return acc, prop
}

func confirmReq(p protocol.CommandProposal) protocol.ConfirmProposalRequest {
	r := protocol.ConfirmProposalRequest{ExpectedCommandHash: p.CommandHash}
	if p.Target != nil {
		r.ExpectedTargetVersion = ptr(p.Target.Version)
	}
	return r
}

// auditTrail returns the decisions of a proposal's audit rows, oldest first,
// checking each row's exact key set (docs/design.md §10).
func (h *harness) auditTrail(proposalID string) []protocol.CommandAudit {
	h.t.Helper()
	rows, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: proposalID})
	if err != nil {
		h.t.Fatal(err)
	}
	want := []string{"command_hash", "command_type", "completed_at", "confirmed_at", "conversation_id", "decision",
		"error_code", "idempotency_key", "proposal_id", "request_id", "result", "risk", "target"}
	var out []protocol.CommandAudit
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if (r.Actor != "studio_operator" && r.Actor != "owner") || r.TargetID == nil || *r.TargetID != proposalID {
			h.t.Fatalf("audit row %+v", r)
		}
		var keys map[string]any
		if err := protocol.Unmarshal(r.Details, &keys); err != nil {
			h.t.Fatal(err)
		}
		var got []string
		for k := range keys {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			h.t.Fatalf("audit keys %v, want %v", got, want)
		}
		var d protocol.CommandAudit
		if err := protocol.Unmarshal(r.Details, &d); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func decisions(trail []protocol.CommandAudit) []string {
	var out []string
	for _, d := range trail {
		out = append(out, string(d.Decision))
	}
	return out
}

func (h *harness) runCount() int {
	h.t.Helper()
	page, err := h.app.ListRuns(h.ctx(), studio.RunQuery{Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(page.Runs)
}

func TestProposalConfirmedExecutesOnceAndTurnEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	acc, prop := h.proposed(c.ID)
	if prop.CommandType != "launch_playbook" || prop.Risk != "execute" || prop.Target == nil || prop.Target.Kind != "playbook" {
		t.Fatalf("proposal %+v", prop)
	}
	if prop.ExpiresAt != protocol.Timestamp(h.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("expiresAt %v", prop.ExpiresAt)
	}
	hash, _ := protocol.ProposalHash(prop.Command, prop.ID)
	if hash != prop.CommandHash || !strings.Contains(prop.Summary, "audit-repo") {
		t.Fatalf("hash %s summary %q", prop.CommandHash, prop.Summary)
	}
	h.waitTurnStatus(acc.RequestID, store.TurnAwaitingConfirmation)
	if n := h.runCount(); n != 0 {
		t.Fatalf("%d runs before confirmation", n)
	}
	res, err := h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != "succeeded" || !strings.Contains(string(res.Result), `"trigger":"operator"`) {
		t.Fatalf("confirm: %+v %v", res, err)
	}
	frames := h.waitDone(c.ID, acc.RequestID)
	var kinds []string
	for _, f := range frames {
		k := string(f.Type)
		if p, ok := f.Payload.(protocol.ConfirmationPayload); ok {
			k += ":" + string(p.State)
		}
		kinds = append(kinds, k)
	}
	want := []string{"text", "text", "tool_call", "proposal", "confirmation:required", "confirmation:confirmed",
		"confirmation:executed", "tool_result", "text", "done"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("frames %v\nwant   %v", kinds, want)
	}
	if m := frames[2].Payload.(protocol.ToolCallPayload).Mode; m != "draft" {
		t.Fatalf("mutate tool_call mode %q", m)
	}
	if tr := frames[7].Payload.(protocol.ToolResultPayload); !tr.OK || tr.CallID != frames[2].Payload.(protocol.ToolCallPayload).CallID {
		t.Fatalf("tool_result %+v", tr)
	}
	if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != "completed" {
		t.Fatalf("outcome %s", d.Outcome)
	}
	trail := h.auditTrail(prop.ID)
	if got := decisions(trail); !slices.Equal(got, []string{"confirmed", "executed"}) {
		t.Fatalf("audit %v", got)
	}
	if trail[0].ConfirmedAt == nil || trail[0].CompletedAt != nil || trail[1].CompletedAt == nil ||
		trail[1].IdempotencyKey != prop.IdempotencyKey || trail[1].CommandHash != prop.CommandHash || trail[1].Risk != "execute" {
		t.Fatalf("audit rows %+v", trail)
	}
	// A repeat confirm answers the stored result and executes nothing.
	again, err := h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
	if err != nil || again.Status != "succeeded" || h.runCount() != 1 {
		t.Fatalf("repeat: %+v %v runs=%d", again, err, h.runCount())
	}
	if len(h.auditTrail(prop.ID)) != 2 {
		t.Fatal("a repeat confirm wrote audit rows")
	}
}

func TestConfirmRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	ctx := h.ctx()

	// Wrong hash, wrong expected version: refused, proposal untouched.
	c := h.conversation()
	_, prop := h.proposed(c.ID)
	bad := confirmReq(prop)
	bad.ExpectedCommandHash = strings.Repeat("0", 64)
	_, err := h.client.Confirm(ctx, c.ID, prop.ID, bad)
	wantCode(t, err, protocol.Conflict)
	bad = confirmReq(prop)
	bad.ExpectedTargetVersion = ptr("999")
	_, err = h.client.Confirm(ctx, c.ID, prop.ID, bad)
	wantCode(t, err, protocol.StaleContext)
	_, err = h.client.Confirm(ctx, c.ID, "6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1", confirmReq(prop))
	wantCode(t, err, protocol.NotFound)
	if st, _ := h.store.GetProposal(ctx, prop.ID); st.Status != store.ProposalPending || len(h.auditTrail(prop.ID)) != 0 {
		t.Fatalf("refused confirms changed the proposal: %s", st.Status)
	}

	// The target changed between proposal and confirm.
	pb, err := h.app.GetPlaybook(ctx, "audit-repo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.app.Execute(ctx, &studio.UpdatePlaybookCommand{Playbook: "audit-repo", ExpectedVersion: pb.Version, Description: ptr("changed")}, studio.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != "conflict" || res.Error == nil || res.Error.Code != protocol.StaleContext {
		t.Fatalf("stale target: %+v %v", res, err)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"failed"}) {
		t.Fatalf("stale target audit %v", got)
	}
	if h.runCount() != 0 {
		t.Fatal("a stale proposal executed")
	}

	// Past its expiry, before any sweep: reads show it pending (reads only
	// read), the confirm refuses it and expires it.
	c = h.conversation()
	acc, prop := h.proposed(c.ID)
	h.clock.Advance(11 * time.Minute)
	if got, err := h.client.Proposal(ctx, prop.ID); err != nil || got.Status != "pending" {
		t.Fatalf("read of a due proposal: %+v %v", got.Status, err)
	}
	if len(h.auditTrail(prop.ID)) != 0 {
		t.Fatal("a read wrote an audit row")
	}
	res, err = h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != "expired" {
		t.Fatalf("expired on confirm: %+v %v", res, err)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"expired"}) {
		t.Fatalf("expired audit %v", got)
	}
	frames := h.waitDone(c.ID, acc.RequestID)
	if !hasConfirmation(frames, "expired") {
		t.Fatal("no confirmation(expired) frame")
	}

	// Already terminal: denied, then confirmed.
	c = h.conversation()
	acc, prop = h.proposed(c.ID)
	if res, err := h.client.Deny(ctx, c.ID, prop.ID); err != nil || res.Status != "cancelled" {
		t.Fatalf("deny: %+v %v", res, err)
	}
	res, err = h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != "cancelled" || res.Error == nil {
		t.Fatalf("confirm after deny: %+v %v", res, err)
	}
	frames = h.waitDone(c.ID, acc.RequestID)
	if !hasConfirmation(frames, "denied") || frames[len(frames)-1].Payload.(protocol.DonePayload).Outcome != "completed" {
		t.Fatalf("deny frames %+v", frames)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"denied"}) {
		t.Fatalf("deny audit %v", got)
	}

	// Archived conversation (refused also if it happens behind the API's
	// back). The second connection waits for the daemon's writer like the
	// daemon's own do (busy_timeout): without it, a write racing the
	// turn's parking failed with "database is locked".
	c = h.conversation()
	acc, prop = h.proposed(c.ID)
	h.waitTurnStatus(acc.RequestID, store.TurnAwaitingConfirmation)
	db, err := sql.Open("sqlite", "file:"+h.store.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE studio_operator_conversations SET status = 'archived' WHERE id = ?`, c.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	wantCode(t, err, protocol.Conflict)
	if h.runCount() != 0 {
		t.Fatal("a refused proposal executed")
	}
}

func hasConfirmation(frames []protocol.Frame, state protocol.ConfirmationState) bool {
	for _, f := range frames {
		if p, ok := f.Payload.(protocol.ConfirmationPayload); ok && p.State == state {
			return true
		}
	}
	return false
}

func TestTwentyConcurrentConfirmsExecuteOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	acc, prop := h.proposed(c.ID)
	var wg sync.WaitGroup
	results := make([]protocol.ProposalResult, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() { results[i], errs[i] = h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop)) })
	}
	wg.Wait()
	for i := range 20 {
		if errs[i] != nil || results[i].Status != "succeeded" || string(results[i].Result) != string(results[0].Result) {
			t.Fatalf("caller %d: %+v %v", i, results[i], errs[i])
		}
	}
	if n := h.runCount(); n != 1 {
		t.Fatalf("%d executions", n)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"confirmed", "executed"}) {
		t.Fatalf("audit %v", got)
	}
	h.waitDone(c.ID, acc.RequestID)
}

func TestAuditFailureFailsClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	ctx := h.ctx()

	// The proposal cannot be stored: the tool says audit_unavailable.
	c := h.conversation()
	h.faults.Fail("CreateProposal", true)
	acc := h.submit(c.ID, "launch audit")
	frames := h.waitDone(c.ID, acc.RequestID)
	h.faults.Fail("CreateProposal", false)
	var tr protocol.ToolResultPayload
	for _, f := range frames {
		if p, ok := f.Payload.(protocol.ToolResultPayload); ok {
			tr = p
		}
	}
	if tr.OK || tr.Error.Code != protocol.AuditUnavailable {
		t.Fatalf("tool result %+v", tr)
	}

	// The confirmed audit row cannot be written: nothing executes.
	c = h.conversation()
	_, prop := h.proposed(c.ID)
	h.faults.Fail("ConfirmProposal", true)
	_, err := h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	wantCode(t, err, protocol.AuditUnavailable)
	h.faults.Fail("ConfirmProposal", false)
	if h.runCount() != 0 {
		t.Fatal("executed without its audit row")
	}
	if st, _ := h.store.GetProposal(ctx, prop.ID); st.Status != store.ProposalPending {
		t.Fatalf("proposal is %s", st.Status)
	}

	// The result cannot be recorded: executing, indeterminate, never again.
	h.faults.Fail("FinishProposal", true)
	res, err := h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	h.faults.Fail("FinishProposal", false)
	if err != nil || res.Status != "executing" || res.Error == nil || res.Error.Code != protocol.AuditUnavailable {
		t.Fatalf("unrecorded result: %+v %v", res, err)
	}
	if st, _ := h.store.GetProposal(ctx, prop.ID); st.Status != store.ProposalExecuting {
		t.Fatalf("proposal is %s", st.Status)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"confirmed", "indeterminate"}) {
		t.Fatalf("audit %v", got)
	}
	again, err := h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop))
	if err != nil || again.Status != "executing" || h.runCount() != 1 {
		t.Fatalf("confirm again: %+v %v runs=%d", again, err, h.runCount())
	}
	report, err := h.app.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := protocol.Marshal(report)
	if !strings.Contains(string(b), prop.ID) {
		t.Fatalf("doctor does not list the indeterminate proposal: %s", b)
	}
	// An admin records the real outcome (reconcile_proposal is an admin
	// command tool: through the operator it is itself a proposal).
	spec, ok := h.coord.Tools().Lookup("reconcile_proposal")
	if !ok || spec.Class != "admin" {
		t.Fatalf("reconcile_proposal tool %+v", spec)
	}
	if _, err := h.app.Execute(ctx, &studio.ReconcileProposalCommand{Proposal: prop.ID, Outcome: "succeeded", Note: "the run is there"},
		studio.ExecOptions{Trigger: studio.TriggerOperator}); err != nil {
		t.Fatal(err)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"confirmed", "indeterminate", "executed"}) {
		t.Fatalf("audit after reconciliation %v", got)
	}
	if again, err := h.client.Confirm(ctx, c.ID, prop.ID, confirmReq(prop)); err != nil || again.Status != "succeeded" || h.runCount() != 1 {
		t.Fatalf("confirm after reconciliation: %+v %v", again, err)
	}
}

func TestCancelAwaitingTurnCancelsItsProposal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	acc, prop := h.proposed(c.ID)
	turn, err := h.client.Cancel(h.ctx(), c.ID, acc.RequestID)
	if err != nil || turn.Status != "cancelled" {
		t.Fatalf("cancel: %+v %v", turn, err)
	}
	frames := h.waitDone(c.ID, acc.RequestID)
	if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != "cancelled" || countDone(frames, acc.RequestID) != 1 {
		t.Fatalf("frames %+v", frames)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"denied"}) {
		t.Fatalf("audit %v", got)
	}
	res, err := h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != "cancelled" || h.runCount() != 0 {
		t.Fatalf("confirm after cancel: %+v %v", res, err)
	}
}

func TestUnknownToolMutateToolAndURLNothingMutated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	acc := h.submit(c.ID, "mixed bag")
	var results []protocol.ToolResultPayload
	var prop protocol.CommandProposal
	h.until(c.ID, 0, func(f protocol.Frame) bool {
		switch p := f.Payload.(type) {
		case protocol.ToolResultPayload:
			results = append(results, p)
		case protocol.ProposalPayload:
			prop = p.Proposal
		case protocol.ConfirmationPayload:
			return true
		}
		return false
	})
	if len(results) != 2 || results[0].Error.Code != protocol.Validation || results[1].Error.Code != protocol.Validation {
		t.Fatalf("results %+v", results)
	}
	if prop.CommandType != "delete_playbook" || prop.Risk != "mutate" {
		t.Fatalf("proposal %+v", prop)
	}
	if _, err := h.app.GetPlaybook(h.ctx(), "audit-repo"); err != nil {
		t.Fatalf("the playbook was deleted without confirmation: %v", err)
	}
	if _, err := h.client.Deny(h.ctx(), c.ID, prop.ID); err != nil {
		t.Fatal(err)
	}
	h.waitDone(c.ID, acc.RequestID)
	if _, err := h.app.GetPlaybook(h.ctx(), "audit-repo"); err != nil {
		t.Fatalf("denied, yet deleted: %v", err)
	}
}

// waitTurnStatus polls until a turn reaches a status: the turn parks just
// after its proposal's frames are visible.
func (h *harness) waitTurnStatus(requestID string, want store.TurnStatus) {
	h.t.Helper()
	testutil.Eventually(h.t, func() bool {
		turn, err := h.store.GetTurn(h.ctx(), requestID)
		if err != nil {
			h.t.Fatal(err)
		}
		return turn.Status == want
	}, "turn ", requestID, " to be ", want)
}

func TestRecoveryCancelsProposalsOfEndedTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	acc, prop := h.proposed(c.ID)
	h.waitTurnStatus(acc.RequestID, store.TurnAwaitingConfirmation)
	// As if the daemon died before parking: the turn was failed by recovery.
	if _, _, err := h.store.FinishTurn(h.ctx(), store.FinishTurnParams{RequestID: acc.RequestID, Status: store.TurnFailed,
		Error: protocol.Errorf(protocol.ServiceRestarted, "restarted"), Now: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := h.coord.Recover(h.ctx()); err != nil {
		t.Fatal(err)
	}
	p, err := h.store.GetProposal(h.ctx(), prop.ID)
	if err != nil || p.Status != store.ProposalCancelled {
		t.Fatalf("orphan proposal %+v %v", p.Status, err)
	}
	if got := decisions(h.auditTrail(prop.ID)); !slices.Equal(got, []string{"denied"}) {
		t.Fatalf("audit %v", got)
	}
	res, err := h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
	if err != nil || res.Status != "cancelled" || h.runCount() != 0 {
		t.Fatalf("confirm orphan: %+v %v", res, err)
	}
}
