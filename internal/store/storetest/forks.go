package storetest

import (
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testForkCopies(t *testing.T, f *fixture) {
	src := f.conversation()
	f.update(store.UpdateConversationParams{ID: src.ID, Model: ptr("local")})
	t1 := f.completeTurn(src.ID, "one")
	f.completeTurn(src.ID, "two", "more")
	f.completeTurn(src.ID, "three")
	srcFrames := f.frames(src.ID) // 3, 4, 3 frames: done at 3, 7, 10
	if len(srcFrames) != 10 {
		t.Fatalf("source frames = %d", len(srcFrames))
	}
	fork := f.fork(src.ID, ptr[int64](7))
	if fork.ForkedFrom == nil || fork.ForkedFrom.ConversationID != src.ID || fork.ForkedFrom.Sequence != 7 || fork.ForkedFrom.CopiedThrough != 7 {
		t.Fatalf("forkedFrom = %+v", fork.ForkedFrom)
	}
	if fork.LastSequence() != 7 || fork.Status != store.ConversationActive || fork.ActiveRequestID != nil || *fork.Title != "triage" || fork.Model == nil || *fork.Model != "local" {
		t.Fatalf("fork = %+v", fork)
	}
	got := f.frames(fork.ID)
	wantSequences(t, got, 1)
	if len(got) != 7 {
		t.Fatalf("fork frames = %d, want 7", len(got))
	}
	reqs := map[string]string{}
	for i, fr := range got {
		s := srcFrames[i]
		if fr.Type != s.Type || fr.ConversationID != fork.ID || !fr.CreatedAt.Equal(s.CreatedAt) {
			t.Fatalf("frame %d = %+v, source %+v", i, fr, s)
		}
		if fr.RequestID == s.RequestID {
			t.Fatalf("frame %d kept the source's request id", i)
		}
		if prev, ok := reqs[s.RequestID]; ok && prev != fr.RequestID {
			t.Fatalf("one source turn became two fork turns")
		}
		reqs[s.RequestID] = fr.RequestID
		if fr.Type != protocol.FrameDone {
			jsonEqual(t, fr.Payload, s.Payload)
			continue
		}
		d := payloadOf(t, fr).(protocol.DonePayload)
		if d.LastSequence != fr.Sequence || d.Outcome != protocol.OutcomeCompleted {
			t.Fatalf("copied done = %+v at %d", d, fr.Sequence)
		}
	}
	// Each copied turn is a turn of the fork: same instruction and context, terminal.
	ft := f.turn(reqs[t1.RequestID])
	if ft.ConversationID != fork.ID || ft.Instruction != t1.Instruction || ft.Status != store.TurnCompleted || string(ft.ContextJSON) != string(t1.ContextJSON) {
		t.Fatalf("fork turn = %+v", ft)
	}
	// The fork goes on by itself; the source is untouched.
	f.completeTurn(fork.ID, "four")
	if n := len(f.frames(fork.ID)); n != 10 {
		t.Fatalf("fork after a turn: %d frames", n)
	}
	if n := len(f.frames(src.ID)); n != 10 || f.get(src.ID).LastSequence() != 10 {
		t.Fatalf("source changed: %d frames", n)
	}
	// A title of its own.
	titled, err := f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: src.ID, ID: newID(), Title: ptr("what if"), NewRequestID: newID, Now: f.tick()})
	if err != nil || *titled.Title != "what if" || titled.LastSequence() != 10 {
		t.Fatalf("titled fork: %+v %v", titled, err)
	}
}

func testForkBoundary(t *testing.T, f *fixture) {
	src := f.conversation()
	f.completeTurn(src.ID, "one")        // 1..3
	f.completeTurn(src.ID, "two", "two") // 4..7
	_, tr := f.submit(src.ID)            // 8, active
	_ = tr
	before := len(list(t, f, store.ListConversationsParams{Limit: 100}))
	for _, tc := range []struct {
		upTo       int64
		prev, next int64
	}{{5, 3, 7}, {2, 0, 3}, {8, 7, 0}, {99, 7, 0}} {
		_, err := f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: src.ID, ID: newID(), UpToSequence: ptr(tc.upTo),
			NewRequestID: newID, Now: f.tick()})
		pe := wantCode(t, err, protocol.Validation)
		if pe.Details["field"] != "upToSequence" || detailInt(t, pe, "nearestBefore") != tc.prev {
			t.Fatalf("upTo %d: details %v", tc.upTo, pe.Details)
		}
		if tc.next > 0 && detailInt(t, pe, "nearestAfter") != tc.next {
			t.Fatalf("upTo %d: details %v", tc.upTo, pe.Details)
		}
		if _, ok := pe.Details["nearestAfter"]; tc.next == 0 && ok {
			t.Fatalf("upTo %d: a nearestAfter that does not exist: %v", tc.upTo, pe.Details)
		}
		if !strings.Contains(pe.Message, "done frame") {
			t.Fatalf("message %q", pe.Message)
		}
	}
	if after := len(list(t, f, store.ListConversationsParams{Limit: 100})); after != before {
		t.Fatal("a refused fork created a conversation")
	}
	// The running turn is not copied by default.
	if c := f.fork(src.ID, nil); c.LastSequence() != 7 || c.ForkedFrom.Sequence != 7 {
		t.Fatalf("default fork of a running conversation = %+v", c)
	}
}

func testForkDefaults(t *testing.T, f *fixture) {
	empty := f.conversation()
	if c := f.fork(empty.ID, nil); c.LastSequence() != 0 || c.ForkedFrom.Sequence != 0 {
		t.Fatalf("fork of an empty conversation = %+v", c)
	}
	src := f.conversation()
	f.completeTurn(src.ID, "one")
	if c := f.fork(src.ID, ptr[int64](0)); c.LastSequence() != 0 || len(f.frames(c.ID)) != 0 {
		t.Fatalf("fork at 0 = %+v", c)
	}
	f.update(store.UpdateConversationParams{ID: src.ID, Status: ptr(store.ConversationArchived)})
	if c := f.fork(src.ID, nil); c.LastSequence() != 3 || c.Status != store.ConversationActive {
		t.Fatalf("fork of an archived conversation = %+v", c)
	}
	f.update(store.UpdateConversationParams{ID: src.ID, Status: ptr(store.ConversationActive)})
	f.deleteConv(src.ID)
	_, err := f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: src.ID, ID: newID(), NewRequestID: newID, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: newID(), ID: newID(), NewRequestID: newID, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testForkNotLive(t *testing.T, f *fixture) {
	src, tr := f.running()
	eff := f.emit(src.ID, tr.RequestID)
	p := f.propose(src.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	// The turn ends with its proposal still pending (a daemon that died; an
	// orphan the coordinator cancels later, without frames).
	f.finish(tr.RequestID, store.TurnFailed, protocol.Errorf(protocol.ServiceRestarted, "restarted"))
	fork := f.fork(src.ID, nil)
	frames := f.frames(fork.ID)
	var sawProposal, sawEffect bool
	for _, fr := range frames {
		switch pl := payloadOf(t, fr).(type) {
		case protocol.ProposalPayload:
			sawProposal = pl.Proposal.ID == p.ID
		case protocol.UICommandPayload:
			sawEffect = pl.EffectID == eff.ID
		}
	}
	if !sawProposal || !sawEffect {
		t.Fatalf("the fork's history lost the proposal or effect frames: %v %v", sawProposal, sawEffect)
	}
	// No rows: nothing in the fork can be confirmed, acknowledged or listed as pending.
	ps, err := f.s.ListProposals(f.ctx, store.ListProposalsParams{ConversationID: fork.ID})
	if err != nil || len(ps) != 0 {
		t.Fatalf("fork proposals = %v %v", ps, err)
	}
	if got := f.proposal(p.ID); got.ConversationID != src.ID || got.Status != store.ProposalPending {
		t.Fatalf("the source's proposal changed: %+v", got)
	}
	if got := f.effect(eff.ID); got.ConversationID != src.ID {
		t.Fatalf("effect moved: %+v", got)
	}
	last := frames[len(frames)-1]
	wantDone(t, last, protocol.OutcomeFailed)
}

func testForkPurges(t *testing.T, f *fixture) {
	src := f.conversation()
	f.completeTurn(src.ID, "one")        // 1..3
	f.completeTurn(src.ID, "two", "two") // 4..7
	f.completeTurn(src.ID, "three")      // 8..10
	// Purge into the second turn: the fork starts with the third.
	if _, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: src.ID, BeforeSequence: 5, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: src.ID, ID: newID(), UpToSequence: ptr[int64](7),
		NewRequestID: newID, Now: f.tick()})
	pe := wantCode(t, err, protocol.Validation)
	if detailInt(t, pe, "nearestAfter") != 10 {
		t.Fatalf("details %v", pe.Details)
	}
	fork := f.fork(src.ID, nil)
	got := f.frames(fork.ID)
	if len(got) != 3 || fork.LastSequence() != 3 || fork.ForkedFrom.CopiedThrough != 3 || fork.ForkedFrom.Sequence != 10 {
		t.Fatalf("fork of a purged conversation: %d frames, last %d", len(got), fork.LastSequence())
	}
	wantSequences(t, got, 1)
	if tp := payloadOf(t, got[0]).(protocol.TextPayload); tp.Role != protocol.RoleUser {
		t.Fatalf("fork does not start with an instruction: %+v", tp)
	}
	// The source is deleted and purged; the fork keeps its history.
	f.deleteConv(src.ID)
	res, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: f.tick()})
	if err != nil || res.Conversations != 1 {
		t.Fatalf("purge: %+v %v", res, err)
	}
	if n := len(f.frames(fork.ID)); n != 3 {
		t.Fatalf("fork lost frames with its source: %d", n)
	}
	// And the fork itself purges cleanly.
	f.deleteConv(fork.ID)
	if res, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: f.tick()}); err != nil || res.Conversations != 1 || res.Turns != 1 {
		t.Fatalf("purge fork: %+v %v", res, err)
	}
}
