package postgres

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// Effects and proposals are in the conformance suite (storetest); what is
// checked here is that their transitions hold when two instances, two
// daemons on one database, race.

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

func newProposal(conv, req string, now time.Time) store.Proposal {
	return store.Proposal{ID: uuid.NewString(), ConversationID: conv, RequestID: req, CallID: "call_1",
		CommandType: "launch_playbook", Command: []byte(`{"args":{"a":"1","b":"2"},"playbook":"audit-repo"}`), CommandHash: "h",
		Target: &protocol.ResourceVersion{Kind: "playbook", ID: "p", Version: "3"}, Risk: protocol.RiskExecute,
		Summary: "Launch audit-repo", IdempotencyKey: uuid.NewString(), ExpiresAt: now.Add(10 * time.Minute)}
}

func auditRow(now time.Time) store.AppendAdminEventParams {
	return store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, Details: []byte(`{"decision":"x"}`), Now: now}
}

// TestTwoInstancesAck: acknowledgements of one effect race through two
// instances. Identical ones all succeed and one is stored; of contradictory
// ones, those identical to the stored acknowledgement succeed and the rest
// are conflict.
func TestTwoInstancesAck(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	now := storetest.Epoch
	conv, req := runningTurn(t, a, now)
	eff := protocol.Effect{Kind: protocol.EffectNavigate, Space: "history", Params: map[string]any{"status": "failed"}}
	route := "/history?status=failed"
	for round := range 10 {
		e, _, err := a.EmitEffect(ctx, store.EmitEffectParams{ID: uuid.NewString(), ConversationID: conv, RequestID: req,
			Effect: eff, ExpiresAt: now.Add(time.Minute), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		acks := []store.AckEffectParams{
			{ID: e.ID, Status: store.EffectApplied, ClientRoute: &route, Now: now.Add(time.Second)},
			{ID: e.ID, Status: store.EffectRejected, RejectionCode: new("not_visible"), Now: now.Add(time.Second)},
		}
		contradictory := round%2 == 1
		errs := make([]error, 6)
		var wg sync.WaitGroup
		for i := range errs {
			st := []*Store{a, b}[i%2]
			ack := acks[0]
			if contradictory && i%3 == 0 {
				ack = acks[1]
			}
			wg.Go(func() { _, errs[i] = st.AckEffect(ctx, ack) })
		}
		wg.Wait()
		got, err := b.GetEffect(ctx, e.ID)
		if err != nil || got.AcknowledgedAt == nil || !got.AcknowledgedAt.Equal(now.Add(time.Second)) {
			t.Fatalf("round %d: acked = %+v, %v", round, got, err)
		}
		for i, err := range errs {
			sent := store.EffectApplied
			if contradictory && i%3 == 0 {
				sent = store.EffectRejected
			}
			if (sent == got.Status) != (err == nil) || (err != nil && !protocol.IsCode(err, protocol.Conflict)) {
				t.Fatalf("round %d: stored %s; ack %d (%s) = %v", round, got.Status, i, sent, err)
			}
		}
	}
}

// TestTwoInstancesConfirm: two instances confirm one proposal at once; one
// wins and the other sees executing. One audit row and one frame result.
func TestTwoInstancesConfirm(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	now := storetest.Epoch
	conv, req := runningTurn(t, a, now)
	for round := range 10 {
		p, err := a.CreateProposal(ctx, store.CreateProposalParams{Proposal: newProposal(conv, req, now), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, st := range []*Store{a, b} {
			wg.Go(func() {
				audit := auditRow(now)
				audit.TargetID = &p.ID
				_, errs[i] = st.ConfirmProposal(ctx, store.ConfirmProposalParams{ID: p.ID, Audit: audit, Now: now,
					Frames: []store.NewFrame{{Payload: protocol.ConfirmationPayload{ProposalID: p.ID, State: protocol.ConfirmationConfirmed}}}})
			})
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: concurrent confirms = %v, want exactly one success", round, errs)
		}
		for _, err := range errs {
			if err != nil {
				if pe := protocol.ErrorOf(err); !protocol.IsCode(err, protocol.Conflict) || pe.Details["status"] != "executing" {
					t.Fatalf("round %d: losing confirm = %v, want conflict with status executing", round, err)
				}
			}
		}
		if events, err := b.ListAdminEvents(ctx, store.ListAdminEventsParams{TargetID: p.ID}); err != nil || len(events) != 1 {
			t.Fatalf("round %d: %d audit rows, %v; want 1", round, len(events), err)
		}
		frames, err := b.ListFrames(ctx, store.ListFramesParams{ConversationID: conv, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var confirmed int
		for _, f := range frames {
			if f.Type != protocol.FrameConfirmation {
				continue
			}
			c, err := protocol.DecodePayload(f.Type, f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if c := c.(protocol.ConfirmationPayload); c.ProposalID == p.ID && c.State == protocol.ConfirmationConfirmed {
				confirmed++
			}
		}
		if confirmed != 1 {
			t.Fatalf("round %d: %d confirmed frames, want 1", round, confirmed)
		}
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
