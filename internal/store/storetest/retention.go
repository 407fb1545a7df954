package storetest

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func testPurgeFrames(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.append(c.ID, tr.RequestID, text("one"), text("two"), text("three"))
	_, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 3, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)              // a turn is active
	f.finish(tr.RequestID, store.TurnCompleted, nil) // frames 1..5, done = 5
	_, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 7, Now: f.tick()})
	wantCode(t, err, protocol.Validation) // beyond the next sequence (6)
	_, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: newID(), BeforeSequence: 1, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)

	signal := f.s.FrameSignal(c.ID)
	res, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 3, Now: f.tick(),
		Audit: auditRow(f, c.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Purged != 2 || res.RetainedFrom != 3 {
		t.Fatalf("purge = %+v, want 2 purged, retained from 3", res)
	}
	waitClosed(t, signal, "purge")
	if got := f.get(c.ID); got.RetainedFrom != 3 || got.LastSequence() != 5 {
		t.Fatalf("conversation after purge: retained %d, last %d", got.RetainedFrom, got.LastSequence())
	}
	frames := f.frames(c.ID)
	if len(frames) != 3 || frames[0].Sequence != 3 {
		t.Fatalf("frames after purge start at %v", frames)
	}
	// An older cut is a no-op; the retained point never moves back.
	res, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 2, Now: f.tick()})
	if err != nil || res.Purged != 0 || res.RetainedFrom != 3 {
		t.Fatalf("older purge = %+v, %v", res, err)
	}
	// Purging everything leaves the sequence where it was.
	res, err = f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: 6, Now: f.tick()})
	if err != nil || res.Purged != 3 || res.RetainedFrom != 6 || len(f.frames(c.ID)) != 0 || f.get(c.ID).NextSequence != 6 {
		t.Fatalf("full purge = %+v, %v", res, err)
	}
	if n := len(f.events("studio.app.command")); n != 1 {
		t.Fatalf("audit rows = %d, want 1", n)
	}
}

func testPurgeDeleted(t *testing.T, f *fixture) {
	mk := func() store.Conversation {
		c, tr := f.running()
		f.append(c.ID, tr.RequestID, text("hello"))
		f.finish(tr.RequestID, store.TurnCompleted, nil)
		if err := f.s.CreateStreamTicket(f.ctx, store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: c.ID,
			ExpiresAt: f.clock.Now().Add(time.Minute), Now: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	old, recent, kept := mk(), mk(), mk()
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: old.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	cutoff := f.clock.Advance(time.Hour)
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: recent.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := len(f.events(""))
	res, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: cutoff,
		Audit: auditRow(f, "")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conversations != 1 || res.Turns != 1 || res.Frames != 3 || res.Tickets != 1 {
		t.Fatalf("purged %+v, want the old conversation's 1 turn, 3 frames, 1 ticket", res)
	}
	_, err = f.s.GetConversation(f.ctx, old.ID)
	wantCode(t, err, protocol.NotFound)
	for _, id := range []string{recent.ID, kept.ID} {
		if len(f.frames(id)) != 3 {
			t.Fatalf("conversation %s lost frames", id)
		}
	}
	if after := len(f.events("")); after != before+1 {
		t.Fatalf("admin events %d -> %d; the audit trail must keep every row and gain one", before, after)
	}
	again, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: cutoff})
	if err != nil || again.Conversations != 0 {
		t.Fatalf("second purge = %+v, %v", again, err)
	}
}

func testDiagnostics(t *testing.T, f *fixture) {
	pb := f.playbook("p")
	f.queueRun(pb, store.TriggerManual)
	f.queueRun(pb, store.TriggerManual)
	f.claim()
	f.running()
	c := f.conversation()
	f.submit(c.ID)
	next := Epoch.Add(time.Hour)
	f.schedule("on", pb, &next)
	f.schedule("off", pb, nil)
	d, err := f.s.Diagnostics(f.ctx, store.DiagnosticsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if d.RunsQueued != 1 || d.RunsRunning != 1 || d.TurnsRunning != 1 || d.TurnsQueued != 1 || d.EnabledSchedules != 1 ||
		d.ExecutingProposalsTotal != 0 || len(d.ExecutingProposals) != 0 {
		t.Fatalf("diagnostics = %+v", d)
	}
}

// testPurgeIdle: retention removes conversations not used since the cutoff
// (archived ones too) with their rows and one audit row, and keeps pinned
// ones, recently used ones, ones with an active turn and deleted ones (the
// recovery window's purge has those); the count matches; a stream's
// subscription learns the conversation is gone.
func testPurgeIdle(t *testing.T, f *fixture) {
	done := func() store.Conversation {
		c, tr := f.running()
		f.append(c.ID, tr.RequestID, text("hello"))
		f.finish(tr.RequestID, store.TurnCompleted, nil)
		return c
	}
	idle, archived, pinned, active, deleted := done(), done(), done(), f.conversation(), done()
	f.submit(active.ID) // a queued turn: the conversation is in use
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: archived.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: pinned.ID, Pinned: ptr(true), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: deleted.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	cutoff := f.clock.Advance(time.Hour)
	recent := done()
	sub := f.s.Subscribe(idle.ID)
	defer sub.Close()

	n, err := f.s.CountIdleConversations(f.ctx, cutoff)
	if err != nil || n != 2 {
		t.Fatalf("CountIdleConversations = %d, %v; want the idle and the archived one", n, err)
	}
	before := len(f.events(""))
	res, err := f.s.PurgeIdleConversations(f.ctx, store.PurgeIdleConversationsParams{UnusedBefore: cutoff, Audit: auditRow(f, "")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conversations != 2 || res.Turns != 2 || res.Frames != 6 || len(res.IDs) != 2 {
		t.Fatalf("purged %+v, want two conversations of one turn and 3 frames each", res)
	}
	for _, id := range []string{idle.ID, archived.ID} {
		_, err := f.s.GetConversation(f.ctx, id)
		wantCode(t, err, protocol.NotFound)
	}
	for _, id := range []string{pinned.ID, active.ID, deleted.ID, recent.ID} {
		if _, err := f.s.GetConversation(f.ctx, id); err != nil {
			t.Fatalf("conversation %s was removed: %v", id, err)
		}
	}
	if after := len(f.events("")); after != before+1 {
		t.Fatalf("admin events %d -> %d, want one more", before, after)
	}
	select {
	case <-sub.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the removed conversation's subscription was not woken")
	}
	if !sub.Gone() {
		t.Fatal("the removed conversation's subscription does not know it is gone")
	}
	if n, err := f.s.CountIdleConversations(f.ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("after the purge CountIdleConversations = %d, %v", n, err)
	}
}
