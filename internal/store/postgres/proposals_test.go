package postgres

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// The conformance suite does not reach effects and proposals (the
// coordinator's tests exercise them on SQLite), so their PostgreSQL code is
// checked here: the transitions, their errors, and that they hold when two
// instances race.

// runningTurn creates a conversation with a running turn on s.
func runningTurn(t *testing.T, s *Store, now time.Time) (convID, requestID string) {
	t.Helper()
	ctx := t.Context()
	convID, requestID = uuid.NewString(), uuid.NewString()
	if _, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: convID, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: convID, RequestID: requestID, Instruction: "go",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(ctx, store.StartTurnParams{RequestID: requestID, Now: now}); err != nil {
		t.Fatal(err)
	}
	return convID, requestID
}

func wantCode(t *testing.T, err error, code protocol.ErrorCode) {
	t.Helper()
	if !protocol.IsCode(err, code) {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

func TestEffects(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	now := storetest.Epoch
	conv, req := runningTurn(t, s, now)
	eff := protocol.Effect{Kind: protocol.EffectNavigate, Space: "history", Params: map[string]any{"status": "failed"}}

	_, _, err := s.EmitEffect(ctx, store.EmitEffectParams{ID: uuid.NewString(), ConversationID: conv, RequestID: uuid.NewString(),
		Effect: eff, ExpiresAt: now.Add(time.Minute), Now: now})
	wantCode(t, err, protocol.Conflict)

	sig := s.FrameSignal(conv)
	e, f, err := s.EmitEffect(ctx, store.EmitEffectParams{ID: uuid.NewString(), ConversationID: conv, RequestID: req,
		Effect: eff, ExpiresAt: now.Add(time.Minute), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig)
	if e.Status != store.EffectPending || e.Type != protocol.EffectNavigate || e.Effect.Space != "history" ||
		f.Type != protocol.FrameUICommand || f.Sequence != 2 || !e.ExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("emitted %+v in frame %+v", e, f)
	}
	if got, err := s.GetEffect(ctx, e.ID); err != nil || got.Effect.Params["status"] != "failed" {
		t.Fatalf("GetEffect = %+v, %v", got, err)
	}
	_, err = s.GetEffect(ctx, uuid.NewString())
	wantCode(t, err, protocol.NotFound)

	// Identical acknowledgements race through two instances: all succeed
	// and one is stored; a contradictory one afterwards is conflict.
	other := openAt(t, s.cfg.ConnString())
	route := "/history?status=failed"
	ack := store.AckEffectParams{ID: e.ID, Status: store.EffectApplied, ClientRoute: &route, Now: now.Add(time.Second)}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		st := []*Store{s, other}[i%2]
		wg.Go(func() { _, errs[i] = st.AckEffect(ctx, ack) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("identical acks: %v", errs)
		}
	}
	got, err := s.GetEffect(ctx, e.ID)
	if err != nil || got.Status != store.EffectApplied || *got.ClientRoute != route || !got.AcknowledgedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("acked = %+v, %v", got, err)
	}
	_, err = s.AckEffect(ctx, store.AckEffectParams{ID: e.ID, Status: store.EffectRejected, RejectionCode: new("unsupported"), Now: now})
	wantCode(t, err, protocol.Conflict)

	// An expired effect: expiring again is quiet, acknowledging is stale.
	e2, _, err := s.EmitEffect(ctx, store.EmitEffectParams{ID: uuid.NewString(), ConversationID: conv, RequestID: req,
		Effect: eff, ExpiresAt: now.Add(time.Minute), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.AckEffect(ctx, store.AckEffectParams{ID: e2.ID, Status: store.EffectExpired, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.AckEffect(ctx, store.AckEffectParams{ID: e2.ID, Status: store.EffectApplied, ClientRoute: &route, Now: now})
	wantCode(t, err, protocol.StaleContext)
}

func newProposal(conv, req string, now time.Time) store.Proposal {
	return store.Proposal{ID: uuid.NewString(), ConversationID: conv, RequestID: req, CallID: "call_1",
		CommandType: "launch_playbook", Command: []byte(`{"playbook":"audit-repo","args":{"b":"2","a":"1"}}`), CommandHash: "h",
		Target: &protocol.ResourceVersion{Kind: "playbook", ID: "p", Version: "3"}, Risk: protocol.RiskExecute,
		Summary: "Launch audit-repo", IdempotencyKey: uuid.NewString(), ExpiresAt: now.Add(10 * time.Minute)}
}

func auditRow(now time.Time) store.AppendAdminEventParams {
	return store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, Details: []byte(`{"decision":"x"}`), Now: now}
}

func TestProposals(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	ctx := t.Context()
	now := storetest.Epoch
	conv, req := runningTurn(t, s, now)

	_, err := s.CreateProposal(ctx, store.CreateProposalParams{Proposal: newProposal(conv, uuid.NewString(), now), Now: now})
	wantCode(t, err, protocol.Conflict)
	parked, err := s.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: req})
	if err != nil || parked {
		t.Fatalf("parked without a proposal = %v, %v", parked, err)
	}

	want := newProposal(conv, req, now)
	p, err := s.CreateProposal(ctx, store.CreateProposalParams{Proposal: want, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// The command comes back byte for byte: its hash was taken over it.
	if p.Status != store.ProposalPending || string(p.Command) != string(want.Command) || *p.Target != *want.Target || p.CallID != "call_1" {
		t.Fatalf("created %+v", p)
	}
	frames, err := s.ListFrames(ctx, store.ListFramesParams{ConversationID: conv})
	if err != nil || len(frames) != 3 || frames[1].Type != protocol.FrameProposal || frames[2].Type != protocol.FrameConfirmation {
		t.Fatalf("frames after proposing = %+v, %v", frames, err)
	}
	if parked, err := s.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: req}); err != nil || !parked {
		t.Fatalf("AwaitConfirmation = %v, %v", parked, err)
	}
	if parked, err := s.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: uuid.NewString()}); err != nil || parked {
		t.Fatalf("AwaitConfirmation of an unknown turn = %v, %v", parked, err)
	}

	// Two instances confirm at once: one wins, the other sees executing.
	other := openAt(t, s.cfg.ConnString())
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, st := range []*Store{s, other} {
		wg.Go(func() {
			_, errs[i] = st.ConfirmProposal(ctx, store.ConfirmProposalParams{ID: p.ID, Audit: auditRow(now), Now: now,
				Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: protocol.ConfirmationConfirmed}}}})
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("concurrent confirms = %v, want exactly one success", errs)
	}
	for _, err := range errs {
		if err != nil {
			var pe *protocol.Error
			if !protocol.IsCode(err, protocol.Conflict) || !asProtocol(err, &pe) || pe.Details["status"] != "executing" {
				t.Fatalf("losing confirm = %v, want conflict with status executing", err)
			}
		}
	}
	got, resumed, err := s.FinishProposal(ctx, store.FinishProposalParams{ID: p.ID, Status: store.ProposalSucceeded,
		Result: []byte(`{"runId":"r1"}`), Audit: auditRow(now), Also: new(auditRow(now)), Now: now.Add(time.Second),
		Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: protocol.ConfirmationExecuted}}}})
	if err != nil || !resumed || got.Status != store.ProposalSucceeded || string(got.Result) != `{"runId":"r1"}` || got.CompletedAt == nil {
		t.Fatalf("finish = %+v, %v, %v", got, resumed, err)
	}
	if tr, err := s.GetTurn(ctx, req); err != nil || tr.Status != store.TurnRunning {
		t.Fatalf("turn after finish = %+v, %v", tr, err)
	}
	events, err := s.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: protocol.AuditAction})
	if err != nil || len(events) != 3 {
		t.Fatalf("audit rows = %d, %v; want confirm, finish and also", len(events), err)
	}

	// A second proposal closed while pending; closing again is conflict.
	p2, err := s.CreateProposal(ctx, store.CreateProposalParams{Proposal: newProposal(conv, req, now), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: req}); err != nil {
		t.Fatal(err)
	}
	closed, resumed, err := s.CloseProposal(ctx, store.CloseProposalParams{ID: p2.ID, Status: store.ProposalExpired, Audit: auditRow(now), Now: now})
	if err != nil || !resumed || closed.Status != store.ProposalExpired {
		t.Fatalf("close = %+v, %v, %v", closed, resumed, err)
	}
	_, _, err = s.CloseProposal(ctx, store.CloseProposalParams{ID: p2.ID, Status: store.ProposalCancelled, Audit: auditRow(now), Now: now})
	wantCode(t, err, protocol.Conflict)
	_, _, err = s.CloseProposal(ctx, store.CloseProposalParams{ID: p2.ID, Status: store.ProposalSucceeded, Audit: auditRow(now), Now: now})
	wantCode(t, err, protocol.Validation)
	_, err = s.GetProposal(ctx, uuid.NewString())
	wantCode(t, err, protocol.NotFound)

	list, err := s.ListProposals(ctx, store.ListProposalsParams{ConversationID: conv,
		Statuses: []store.ProposalStatus{store.ProposalExpired, store.ProposalCancelled}})
	if err != nil || len(list) != 1 || list[0].ID != p2.ID {
		t.Fatalf("ListProposals(expired, cancelled) = %+v, %v", list, err)
	}
	if list, err := s.ListProposals(ctx, store.ListProposalsParams{RequestID: req}); err != nil || len(list) != 2 {
		t.Fatalf("ListProposals(request) = %d, %v", len(list), err)
	}
}

// TestTurnEndsRacingProposal: a turn's end and its proposal's close lock
// in one order (conversation, proposal, turn), so racing them through two
// instances neither deadlocks nor writes two done frames.
func TestTurnEndsRacingProposal(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	now := storetest.Epoch
	for range 10 {
		conv, req := runningTurn(t, a, now)
		p, err := a.CreateProposal(ctx, store.CreateProposalParams{Proposal: newProposal(conv, req, now), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: req}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var finishErr, closeErr error
		wg.Go(func() {
			_, _, finishErr = a.FinishTurn(ctx, store.FinishTurnParams{RequestID: req, Status: store.TurnCancelled, Now: now})
		})
		wg.Go(func() {
			_, _, closeErr = b.CloseProposal(ctx, store.CloseProposalParams{ID: p.ID, Status: store.ProposalCancelled, Audit: auditRow(now), Now: now,
				Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: protocol.ConfirmationDenied}}}})
		})
		wg.Wait()
		if finishErr != nil {
			t.Fatalf("FinishTurn: %v", finishErr)
		}
		// The close either came first, or found the turn over (its frames
		// need the active turn): conflict, never a database error.
		if closeErr != nil && !protocol.IsCode(closeErr, protocol.Conflict) {
			t.Fatalf("CloseProposal: %v", closeErr)
		}
		frames, err := b.ListFrames(ctx, store.ListFramesParams{ConversationID: conv})
		if err != nil {
			t.Fatal(err)
		}
		var dones int
		for i, f := range frames {
			if f.Sequence != int64(i+1) {
				t.Fatalf("frame %d has sequence %d", i, f.Sequence)
			}
			if f.Type == protocol.FrameDone {
				dones++
			}
		}
		if dones != 1 || frames[len(frames)-1].Type != protocol.FrameDone {
			t.Fatalf("%d done frames, last %s", dones, frames[len(frames)-1].Type)
		}
	}
}

func asProtocol(err error, pe **protocol.Error) bool { return errors.As(err, pe) }
