package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Exercise runs the conformance suite against a backend. open must return a
// fresh, migrated store for the subtest t and close it in t.Cleanup. Every
// subtest opens its own store and most run in parallel.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := func(name string, fn func(t *testing.T, f *fixture)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newFixture(t, open))
		})
	}

	run("SchemaVersion", testSchemaVersion)
	t.Run("App", func(t *testing.T) { ExerciseApp(t, open) })
	t.Run("Effects", func(t *testing.T) { ExerciseEffects(t, open) })
	t.Run("Proposals", func(t *testing.T) { ExerciseProposals(t, open) })
	t.Run("Engine", func(t *testing.T) { ExerciseEngine(t, open) })

	run("Conversation/CreateGet", testConversationCreateGet)
	run("Conversation/GetMissing", testConversationGetMissing)
	run("Conversation/CreateDuplicateID", testConversationCreateDuplicate)
	run("Conversation/ListStatusFilter", testConversationListStatus)
	run("Conversation/ListPaging", testConversationListPaging)
	run("Conversation/Rename", testConversationRename)
	run("Conversation/ArchiveUnarchive", testConversationArchive)
	run("Conversation/ArchiveRefusedWhileActive", testConversationArchiveActive)
	run("Conversation/UpdateRefusesDeletedStatus", testConversationUpdateBadStatus)
	run("Conversation/Delete", testConversationDelete)
	run("Conversation/DeleteRefusedWhileActive", testConversationDeleteActive)
	run("Conversation/Missing", testConversationMissing)

	run("SubmitTurn/First", testSubmitFirst)
	run("SubmitTurn/SecondActiveConflict", testSubmitActiveConflict)
	run("SubmitTurn/StaleContext", testSubmitStale)
	run("SubmitTurn/Archived", testSubmitArchived)
	run("SubmitTurn/DeletedOrMissing", testSubmitDeletedMissing)
	run("SubmitTurn/DuplicateRequestID", testSubmitDuplicateRequest)
	run("SubmitTurn/ConcurrentExactlyOne", testSubmitConcurrent)

	run("StartTurn", testStartTurn)
	run("FinishTurn/ErrorAndDone", testFinishError)
	run("FinishTurn/DoneAlone", testFinishDone)
	run("FinishTurn/Twice", testFinishTwice)
	run("FinishTurn/NotTerminal", testFinishNotTerminal)
	run("FinishTurn/Missing", testFinishMissing)

	run("RequestCancel/Queued", testCancelQueued)
	run("RequestCancel/Running", testCancelRunning)
	run("RequestCancel/Terminal", testCancelTerminal)
	run("RequestCancel/Missing", testCancelMissing)

	run("RecoverTurns", testRecoverTurns)
	run("SetTurnContext", testSetTurnContext)

	run("AppendFrames/ActiveRequest", testAppendActive)
	run("AppendFrames/NotActive", testAppendNotActive)
	run("AppendFrames/InvalidPayload", testAppendInvalid)
	run("AppendFrames/DoneRefused", testAppendDone)
	run("AppendFrames/Concurrent", testAppendConcurrent)
	run("ListFrames/Paging", testListFramesPaging)

	run("FrameSignal/AppendWakesOnlyItsConversation", testSignalAppend)
	run("FrameSignal/TurnTransitions", testSignalTurn)

	run("StreamTicket/RedeemOnce", testTicketRedeemOnce)
	run("StreamTicket/Expired", testTicketExpired)
	run("StreamTicket/Unknown", testTicketUnknown)
	run("StreamTicket/MissingConversation", testTicketMissingConversation)
	run("StreamTicket/ConcurrentRedeem", testTicketConcurrent)

	run("AdminEvents/AppendList", testAdminEvents)
}

func testSchemaVersion(t *testing.T, f *fixture) {
	v, err := f.s.SchemaVersion(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v < 1 {
		t.Fatalf("SchemaVersion = %d, want a migrated store", v)
	}
}

// --- conversations ----------------------------------------------------------

func testConversationCreateGet(t *testing.T, f *fixture) {
	now := f.tick()
	id := newID()
	c, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: id, Project: ptr("studio"), Title: ptr("triage"), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got := f.get(id)
	for _, c := range []store.Conversation{c, got} {
		if c.ID != id || *c.Project != "studio" || *c.Title != "triage" || c.Status != store.ConversationActive {
			t.Fatalf("conversation = %+v", c)
		}
		if c.NextSequence != 1 || c.LastSequence() != 0 || c.RetainedFrom != 1 || c.ActiveRequestID != nil {
			t.Fatalf("new conversation sequences = next %d, retained %d, active %v", c.NextSequence, c.RetainedFrom, c.ActiveRequestID)
		}
		if !c.CreatedAt.Equal(now) || !c.UpdatedAt.Equal(now) || c.ArchivedAt != nil || c.DeletedAt != nil {
			t.Fatalf("timestamps = %v %v %v %v, want created=updated=%v", c.CreatedAt, c.UpdatedAt, c.ArchivedAt, c.DeletedAt, now)
		}
	}

	// Project and title are optional.
	bare, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: newID(), Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(bare.ID); got.Project != nil || got.Title != nil {
		t.Fatalf("bare conversation project/title = %v/%v, want nil", got.Project, got.Title)
	}
}

func testConversationGetMissing(t *testing.T, f *fixture) {
	_, err := f.s.GetConversation(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)
}

func testConversationCreateDuplicate(t *testing.T, f *fixture) {
	c := f.conversation()
	_, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: c.ID, Now: f.tick()})
	if err == nil {
		t.Fatal("creating a conversation with an existing id succeeded")
	}
	if got := f.get(c.ID); *got.Title != "triage" {
		t.Fatalf("duplicate create changed the row: %+v", got)
	}
}

func list(t *testing.T, f *fixture, p store.ListConversationsParams) []store.Conversation {
	t.Helper()
	cs, err := f.s.ListConversations(f.ctx, p)
	if err != nil {
		t.Fatalf("ListConversations(%+v): %v", p, err)
	}
	return cs
}

func ids(cs []store.Conversation) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func testConversationListStatus(t *testing.T, f *fixture) {
	var active, archived, deleted []string
	for i := range 6 {
		c := f.conversation()
		switch i % 3 {
		case 0:
			active = append(active, c.ID)
		case 1:
			if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
				t.Fatal(err)
			}
			archived = append(archived, c.ID)
		case 2:
			if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()}); err != nil {
				t.Fatal(err)
			}
			deleted = append(deleted, c.ID)
		}
	}
	for _, tc := range []struct {
		status store.ConversationStatus
		want   []string
	}{
		{"", append(append([]string(nil), active...), archived...)},
		{store.ConversationActive, active},
		{store.ConversationArchived, archived},
		{store.ConversationDeleted, deleted},
	} {
		got := list(t, f, store.ListConversationsParams{Status: tc.status, Limit: 100})
		if !slices.IsSortedFunc(got, func(a, b store.Conversation) int { return b.CreatedAt.Compare(a.CreatedAt) }) {
			t.Fatalf("status %q: not newest first: %v", tc.status, got)
		}
		gotIDs := ids(got)
		slices.Sort(gotIDs)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(gotIDs, want) {
			t.Fatalf("status %q lists %v, want %v", tc.status, gotIDs, want)
		}
		for _, c := range got {
			if tc.status != "" && c.Status != tc.status {
				t.Fatalf("status %q listed a %s conversation", tc.status, c.Status)
			}
		}
	}
}

func testConversationListPaging(t *testing.T, f *fixture) {
	// 23 conversations, four to a timestamp: pages must break inside groups of
	// equal created_at without skipping or repeating a row.
	const n = 23
	want := map[string]bool{}
	now := f.clock.Now()
	for i := range n {
		if i%4 == 0 {
			now = f.tick()
		}
		c, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: newID(), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		want[c.ID] = true
	}
	for _, limit := range []int{1, 3, 4, 5, 22, 23, 50} {
		var got []store.Conversation
		p := store.ListConversationsParams{Limit: limit}
		for range n + 2 {
			page := list(t, f, p)
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			last := page[len(page)-1]
			p.AfterCreated, p.AfterID = ptr(last.CreatedAt), last.ID
		}
		if len(got) != n {
			t.Fatalf("limit %d: paged %d conversations, want %d", limit, len(got), n)
		}
		seen := map[string]bool{}
		for i, c := range got {
			if seen[c.ID] || !want[c.ID] {
				t.Fatalf("limit %d: conversation %s repeated or unknown", limit, c.ID)
			}
			seen[c.ID] = true
			if i > 0 {
				prev := got[i-1]
				if c.CreatedAt.After(prev.CreatedAt) || (c.CreatedAt.Equal(prev.CreatedAt) && c.ID > prev.ID) {
					t.Fatalf("limit %d: order broken at %d: (%v,%s) after (%v,%s)", limit, i, c.CreatedAt, c.ID, prev.CreatedAt, prev.ID)
				}
			}
		}
	}
}

func testConversationRename(t *testing.T, f *fixture) {
	c := f.conversation()
	now := f.tick()
	got, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Title: ptr("renamed"), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Title != "renamed" || got.Status != store.ConversationActive || !got.UpdatedAt.Equal(now) {
		t.Fatalf("after rename: %+v", got)
	}
	if g := f.get(c.ID); *g.Title != "renamed" || !g.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("stored after rename: %+v", g)
	}
	// Renaming does not need the conversation to be idle.
	_, tr := f.running()
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: tr.ConversationID, Title: ptr("busy"), Now: f.tick()}); err != nil {
		t.Fatalf("rename during a turn: %v", err)
	}
}

func testConversationArchive(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.frames(c.ID)

	now := f.tick()
	got, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.ConversationArchived || got.ArchivedAt == nil || !got.ArchivedAt.Equal(now) {
		t.Fatalf("archived = %+v", got)
	}
	if g := f.get(c.ID); g.Status != store.ConversationArchived {
		t.Fatalf("stored status %s", g.Status)
	}
	// Archived is read-only but replayable.
	if after := f.frames(c.ID); len(after) != len(before) {
		t.Fatalf("archived replay has %d frames, want %d", len(after), len(before))
	}
	// Archiving again is a no-op.
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
		t.Fatalf("archive twice: %v", err)
	}

	got, err = f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationActive), Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.ConversationActive || got.ArchivedAt != nil {
		t.Fatalf("unarchived = %+v", got)
	}
	// Active again: a turn is accepted.
	f.submit(c.ID)
}

func testConversationArchiveActive(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	_, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()})
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["activeRequestId"] != tr.RequestID {
		t.Fatalf("details = %v, want activeRequestId %s", pe.Details, tr.RequestID)
	}
	if g := f.get(c.ID); g.Status != store.ConversationActive || g.ArchivedAt != nil {
		t.Fatalf("refused archive changed the row: %+v", g)
	}
	// Once the turn ends, archive succeeds.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
}

func testConversationUpdateBadStatus(t *testing.T, f *fixture) {
	c := f.conversation()
	_, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationDeleted), Now: f.tick()})
	wantCode(t, err, protocol.Validation)
	if g := f.get(c.ID); g.Status != store.ConversationActive {
		t.Fatalf("status = %s after refused update", g.Status)
	}
}

func testConversationDelete(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	frames := f.frames(c.ID)

	now := f.tick()
	got, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.ConversationDeleted || got.DeletedAt == nil || !got.DeletedAt.Equal(now) {
		t.Fatalf("deleted = %+v", got)
	}
	// Stage one only marks: the row and its frames stay.
	if g := f.get(c.ID); g.Status != store.ConversationDeleted {
		t.Fatalf("stored status = %s", g.Status)
	}
	if n := len(f.frames(c.ID)); n != len(frames) {
		t.Fatalf("frames after delete = %d, want %d", n, len(frames))
	}
	for _, p := range []store.UpdateConversationParams{
		{ID: c.ID, Title: ptr("x"), Now: f.tick()},
		{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()},
		{ID: c.ID, Status: ptr(store.ConversationActive), Now: f.tick()},
	} {
		_, err := f.s.UpdateConversation(f.ctx, p)
		wantCode(t, err, protocol.NotFound)
	}
	_, err = f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	if g := f.get(c.ID); g.Status != store.ConversationDeleted || *g.Title != "triage" {
		t.Fatalf("refused updates changed the row: %+v", g)
	}
	if slices.Contains(ids(list(t, f, store.ListConversationsParams{Limit: 100})), c.ID) {
		t.Fatal("default list shows a deleted conversation")
	}
}

func testConversationDeleteActive(t *testing.T, f *fixture) {
	c, tr := f.running()
	_, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if g := f.get(c.ID); g.Status != store.ConversationActive || *g.ActiveRequestID != tr.RequestID {
		t.Fatalf("refused delete changed the row: %+v", g)
	}
}

func testConversationMissing(t *testing.T, f *fixture) {
	_, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: newID(), Title: ptr("x"), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

// --- submission -------------------------------------------------------------

func testSubmitFirst(t *testing.T, f *fixture) {
	c := f.conversation()
	p := f.submitParams(c.ID, 0)
	tr, fr, err := f.s.SubmitTurn(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if tr.RequestID != p.RequestID || tr.ConversationID != c.ID || tr.Instruction != p.Instruction ||
		tr.Status != store.TurnQueued || tr.ContextHash != p.ContextHash || !tr.CreatedAt.Equal(p.Now) ||
		tr.StartedAt != nil || tr.EndedAt != nil || tr.CancelRequestedAt != nil || tr.ErrorCode != nil {
		t.Fatalf("turn = %+v", tr)
	}
	if !jsonEqual(t, tr.ContextJSON, p.ContextJSON) {
		t.Fatalf("context_json = %s, want %s", tr.ContextJSON, p.ContextJSON)
	}
	if fr.Sequence != 1 || fr.ConversationID != c.ID || fr.RequestID != p.RequestID || fr.Type != protocol.FrameText || !fr.CreatedAt.Equal(p.Now) {
		t.Fatalf("first frame = %+v", fr)
	}
	want := protocol.TextPayload{Content: p.Instruction, Format: "plain", Role: protocol.RoleUser}
	if got := payloadOf(t, fr); got != want {
		t.Fatalf("first frame payload = %#v, want %#v", got, want)
	}
	conv := f.get(c.ID)
	if conv.ActiveRequestID == nil || *conv.ActiveRequestID != p.RequestID {
		t.Fatalf("active_request_id = %v, want %s", conv.ActiveRequestID, p.RequestID)
	}
	// acceptedSequence is the user frame's sequence and the conversation's tail.
	if conv.LastSequence() != fr.Sequence {
		t.Fatalf("last sequence = %d, accepted sequence %d", conv.LastSequence(), fr.Sequence)
	}
	stored := f.frames(c.ID)
	if len(stored) != 1 || stored[0].Sequence != fr.Sequence || !jsonEqual(t, stored[0].Payload, fr.Payload) {
		t.Fatalf("stored frames = %+v, want the user frame", stored)
	}
	if g := f.turn(p.RequestID); g.Status != store.TurnQueued || !jsonEqual(t, g.ContextJSON, p.ContextJSON) {
		t.Fatalf("GetTurn = %+v", g)
	}
	_, err = f.s.GetTurn(f.ctx, newID())
	wantCode(t, err, protocol.NotFound)

	// The second turn's user frame continues the conversation's sequence.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	_, fr2 := f.submit(c.ID)
	if fr2.Sequence != 3 {
		t.Fatalf("second turn's user frame has sequence %d, want 3", fr2.Sequence)
	}
}

// wantNoTrace checks that a refused submission left nothing behind.
func wantNoTrace(t *testing.T, f *fixture, before store.Conversation, requestID string) {
	t.Helper()
	_, err := f.s.GetTurn(f.ctx, requestID)
	wantCode(t, err, protocol.NotFound)
	after := f.get(before.ID)
	if after.NextSequence != before.NextSequence || !slices.Equal(ptrSlice(after.ActiveRequestID), ptrSlice(before.ActiveRequestID)) {
		t.Fatalf("refused submission changed the conversation: %+v -> %+v", before, after)
	}
	if n := int64(len(f.frames(before.ID))); n != before.LastSequence() {
		t.Fatalf("refused submission left %d frames, want %d", n, before.LastSequence())
	}
	for _, fr := range f.frames(before.ID) {
		if fr.RequestID == requestID {
			t.Fatalf("refused submission wrote frame %d", fr.Sequence)
		}
	}
}

func ptrSlice(p *string) []string {
	if p == nil {
		return nil
	}
	return []string{*p}
}

func testSubmitActiveConflict(t *testing.T, f *fixture) {
	c := f.conversation()
	first, _ := f.submit(c.ID)
	before := f.get(c.ID)
	// Right sequence and wrong sequence alike: the active turn wins.
	for _, expected := range []int64{before.LastSequence(), 0, 99} {
		p := f.submitParams(c.ID, expected)
		_, _, err := f.s.SubmitTurn(f.ctx, p)
		pe := wantCode(t, err, protocol.Conflict)
		if pe.Details["activeRequestId"] != first.RequestID {
			t.Fatalf("details = %v, want activeRequestId %s", pe.Details, first.RequestID)
		}
		wantNoTrace(t, f, before, p.RequestID)
	}
}

func testSubmitStale(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	f.append(c.ID, tr.RequestID, text("a"), text("b"))
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.get(c.ID)
	if before.LastSequence() != 4 {
		t.Fatalf("last sequence = %d, want 4", before.LastSequence())
	}
	for _, expected := range []int64{0, 1, 3, 5} {
		p := f.submitParams(c.ID, expected)
		_, _, err := f.s.SubmitTurn(f.ctx, p)
		pe := wantCode(t, err, protocol.StaleContext)
		if got := detailInt(t, pe, "actualLastSequence"); got != 4 {
			t.Fatalf("actualLastSequence = %d, want 4", got)
		}
		wantNoTrace(t, f, before, p.RequestID)
	}
	if _, _, err := f.s.SubmitTurn(f.ctx, f.submitParams(c.ID, 4)); err != nil {
		t.Fatalf("submit at the tail: %v", err)
	}
}

func testSubmitArchived(t *testing.T, f *fixture) {
	c := f.conversation()
	if _, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived), Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := f.get(c.ID)
	p := f.submitParams(c.ID, 0)
	_, _, err := f.s.SubmitTurn(f.ctx, p)
	wantCode(t, err, protocol.Conflict)
	wantNoTrace(t, f, before, p.RequestID)
}

func testSubmitDeletedMissing(t *testing.T, f *fixture) {
	c := f.conversation()
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	before := f.get(c.ID)
	p := f.submitParams(c.ID, 0)
	_, _, err := f.s.SubmitTurn(f.ctx, p)
	wantCode(t, err, protocol.NotFound)
	wantNoTrace(t, f, before, p.RequestID)

	p = f.submitParams(newID(), 0)
	_, _, err = f.s.SubmitTurn(f.ctx, p)
	wantCode(t, err, protocol.NotFound)
	_, err = f.s.GetTurn(f.ctx, p.RequestID)
	wantCode(t, err, protocol.NotFound)
}

func testSubmitDuplicateRequest(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.get(c.ID)
	p := f.submitParams(c.ID, before.LastSequence())
	p.RequestID = tr.RequestID
	if _, _, err := f.s.SubmitTurn(f.ctx, p); err == nil {
		t.Fatal("a reused request id was accepted")
	}
	after := f.get(c.ID)
	if after.NextSequence != before.NextSequence || after.ActiveRequestID != nil {
		t.Fatalf("refused submission changed the conversation: %+v", after)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnCompleted {
		t.Fatalf("refused submission changed the old turn: %+v", g)
	}
}

func testSubmitConcurrent(t *testing.T, f *fixture) {
	for round := range 10 {
		c := f.conversation()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		params := []store.SubmitTurnParams{f.submitParams(c.ID, 0), f.submitParams(c.ID, 0)}
		for i := range 2 {
			wg.Go(func() { _, _, errs[i] = f.s.SubmitTurn(f.ctx, params[i]) })
		}
		wg.Wait()
		var ok, conflict int
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
				winner = params[i].RequestID
			case protocol.IsCode(err, protocol.Conflict):
				conflict++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if ok != 1 || conflict != 1 {
			t.Fatalf("round %d: %d succeeded and %d conflicted, want 1 and 1", round, ok, conflict)
		}
		frames := f.frames(c.ID)
		if len(frames) != 1 || frames[0].RequestID != winner {
			t.Fatalf("round %d: frames = %+v, want only the winner's user frame", round, frames)
		}
		if g := f.get(c.ID); *g.ActiveRequestID != winner {
			t.Fatalf("round %d: active request %s, winner %s", round, *g.ActiveRequestID, winner)
		}
	}
}

// --- turn transitions ---------------------------------------------------------

func testStartTurn(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	now := f.tick()
	got, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.TurnRunning || got.StartedAt == nil || !got.StartedAt.Equal(now) {
		t.Fatalf("started = %+v", got)
	}
	// running -> running is not a start.
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if g := f.turn(tr.RequestID); !g.StartedAt.Equal(now) {
		t.Fatalf("refused start moved started_at to %v", g.StartedAt)
	}
	// A finished turn cannot start.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if g := f.turn(tr.RequestID); g.Status != store.TurnCompleted {
		t.Fatalf("refused start changed status to %s", g.Status)
	}
	_, err = f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testFinishError(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.append(c.ID, tr.RequestID, text("thinking"))
	now := f.tick()
	perr := protocol.Errorf(protocol.ModelFailure, "provider answered 500")
	got, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed, Error: perr, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 {
		t.Fatalf("FinishTurn wrote %d frames, want error and done", len(frames))
	}
	wantSequences(t, frames, 3)
	wantError(t, frames[0], protocol.ModelFailure)
	wantDone(t, frames[1], protocol.OutcomeFailed)
	for _, fr := range frames {
		if fr.RequestID != tr.RequestID || !fr.CreatedAt.Equal(now) {
			t.Fatalf("frame %+v", fr)
		}
	}
	if got.Status != store.TurnFailed || got.ErrorCode == nil || *got.ErrorCode != string(protocol.ModelFailure) ||
		got.EndedAt == nil || !got.EndedAt.Equal(now) {
		t.Fatalf("finished turn = %+v", got)
	}
	stored := f.frames(c.ID)
	if len(stored) != 4 {
		t.Fatalf("stored %d frames, want 4", len(stored))
	}
	wantDone(t, stored[3], protocol.OutcomeFailed)
	conv := f.get(c.ID)
	if conv.ActiveRequestID != nil {
		t.Fatalf("active_request_id = %s after finish", *conv.ActiveRequestID)
	}
	// The conversation accepts a new turn at the done frame's sequence.
	if _, _, err := f.s.SubmitTurn(f.ctx, f.submitParams(c.ID, frames[1].Sequence)); err != nil {
		t.Fatalf("submit after finish: %v", err)
	}
}

func testFinishDone(t *testing.T, f *fixture) {
	for _, status := range []store.TurnStatus{store.TurnCompleted, store.TurnFailed, store.TurnCancelled} {
		c, tr := f.running()
		got, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: status, Now: f.tick()})
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != 1 {
			t.Fatalf("%s: FinishTurn wrote %d frames, want done alone", status, len(frames))
		}
		wantSequences(t, frames, 2)
		wantDone(t, frames[0], status.Outcome())
		if got.Status != status || got.EndedAt == nil {
			t.Fatalf("%s: finished turn = %+v", status, got)
		}
		if status == store.TurnCompleted && got.ErrorCode != nil {
			t.Fatalf("completed turn has error code %s", *got.ErrorCode)
		}
		if f.get(c.ID).ActiveRequestID != nil {
			t.Fatalf("%s: conversation still active", status)
		}
	}
	// A queued turn may be finished without starting (e.g. a failure before
	// the worker picked it up).
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	frames := f.finish(tr.RequestID, store.TurnFailed, protocol.Errorf(protocol.ServiceFailure, "no worker"))
	wantError(t, frames[0], protocol.ServiceFailure)
	wantDone(t, frames[1], protocol.OutcomeFailed)
}

func testFinishTwice(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.get(c.ID)
	_, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed,
		Error: protocol.Errorf(protocol.ModelFailure, "late"), Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	if len(frames) != 0 {
		t.Fatalf("second finish returned %d frames", len(frames))
	}
	if after := f.get(c.ID); after.NextSequence != before.NextSequence {
		t.Fatalf("second finish appended frames: next %d -> %d", before.NextSequence, after.NextSequence)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnCompleted || g.ErrorCode != nil {
		t.Fatalf("second finish changed the turn: %+v", g)
	}
	// Exactly one done frame.
	var dones int
	for _, fr := range f.frames(c.ID) {
		if fr.Type == protocol.FrameDone {
			dones++
		}
	}
	if dones != 1 {
		t.Fatalf("%d done frames, want 1", dones)
	}
}

func testFinishNotTerminal(t *testing.T, f *fixture) {
	c, tr := f.running()
	for _, status := range []store.TurnStatus{store.TurnQueued, store.TurnRunning, store.TurnAwaitingConfirmation, "bogus"} {
		if _, _, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: status, Now: f.tick()}); err == nil {
			t.Fatalf("FinishTurn with status %q succeeded", status)
		}
	}
	if g := f.get(c.ID); g.NextSequence != 2 || g.ActiveRequestID == nil {
		t.Fatalf("refused finishes changed the conversation: %+v", g)
	}
	if g := f.turn(tr.RequestID); g.Status != store.TurnRunning {
		t.Fatalf("refused finishes changed the turn: %+v", g)
	}
}

func testFinishMissing(t *testing.T, f *fixture) {
	_, _, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: newID(), Status: store.TurnCompleted, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func cancel(t *testing.T, f *fixture, requestID string) (store.Turn, []store.Frame) {
	t.Helper()
	tr, frames, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: requestID, Now: f.tick()})
	if err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	return tr, frames
}

func testCancelQueued(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	now := f.clock.Now().Add(time.Second)
	got, frames := cancel(t, f, tr.RequestID)
	if got.Status != store.TurnCancelled || got.CancelRequestedAt == nil || !got.CancelRequestedAt.Equal(now) ||
		got.EndedAt == nil || !got.EndedAt.Equal(now) {
		t.Fatalf("cancelled queued turn = %+v", got)
	}
	if len(frames) != 1 {
		t.Fatalf("cancel wrote %d frames, want done", len(frames))
	}
	wantSequences(t, frames, 2)
	wantDone(t, frames[0], protocol.OutcomeCancelled)
	if f.get(c.ID).ActiveRequestID != nil {
		t.Fatal("cancelled turn still holds the conversation")
	}
	// Idempotent: the same answer, nothing new.
	again, frames := cancel(t, f, tr.RequestID)
	if len(frames) != 0 || again.Status != store.TurnCancelled || !sameTime(again.CancelRequestedAt, got.CancelRequestedAt) || !sameTime(again.EndedAt, got.EndedAt) {
		t.Fatalf("second cancel = %+v with %d frames", again, len(frames))
	}
	if n := len(f.frames(c.ID)); n != 2 {
		t.Fatalf("%d frames after two cancels, want 2", n)
	}
	// A cancelled turn does not start.
	_, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
}

func testCancelRunning(t *testing.T, f *fixture) {
	c, tr := f.running()
	now := f.clock.Now().Add(time.Second)
	got, frames := cancel(t, f, tr.RequestID)
	if got.Status != store.TurnRunning || got.CancelRequestedAt == nil || !got.CancelRequestedAt.Equal(now) || got.EndedAt != nil {
		t.Fatalf("cancel of a running turn = %+v", got)
	}
	if len(frames) != 0 {
		t.Fatalf("cancel of a running turn wrote %d frames", len(frames))
	}
	conv := f.get(c.ID)
	if conv.ActiveRequestID == nil || conv.NextSequence != 2 {
		t.Fatalf("cancel of a running turn changed the conversation: %+v", conv)
	}
	// Idempotent: the first request time stays.
	again, frames := cancel(t, f, tr.RequestID)
	if len(frames) != 0 || again.Status != store.TurnRunning || !again.CancelRequestedAt.Equal(now) {
		t.Fatalf("second cancel = %+v", again)
	}
	// The worker then ends the turn.
	done := f.finish(tr.RequestID, store.TurnCancelled, nil)
	wantDone(t, done[len(done)-1], protocol.OutcomeCancelled)
}

func testCancelTerminal(t *testing.T, f *fixture) {
	c, tr := f.running()
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before := f.turn(tr.RequestID)
	got, frames := cancel(t, f, tr.RequestID)
	if len(frames) != 0 || got.Status != store.TurnCompleted || got.CancelRequestedAt != nil || !sameTime(got.EndedAt, before.EndedAt) {
		t.Fatalf("cancel of a completed turn = %+v with %d frames", got, len(frames))
	}
	if n := len(f.frames(c.ID)); n != 2 {
		t.Fatalf("%d frames, want 2", n)
	}
}

func testCancelMissing(t *testing.T, f *fixture) {
	_, _, err := f.s.RequestCancel(f.ctx, store.RequestCancelParams{RequestID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testRecoverTurns(t *testing.T, f *fixture) {
	queuedConv := f.conversation()
	queued, _ := f.submit(queuedConv.ID)
	runningConv, running := f.running()
	f.append(runningConv.ID, running.RequestID, text("half an answer"))
	doneConv, done := f.running()
	f.finish(done.RequestID, store.TurnCompleted, nil)
	doneFrames := f.frames(doneConv.ID)
	idle := f.conversation()

	now := f.tick()
	recovered, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Turn{}
	for _, tr := range recovered {
		got[tr.RequestID] = tr
	}
	if len(recovered) != 2 || got[queued.RequestID].RequestID == "" || got[running.RequestID].RequestID == "" {
		t.Fatalf("recovered %v, want the queued and the running turn", slices.Collect(mapKeys(got)))
	}
	for _, tc := range []struct {
		conv    string
		turn    string
		lastSeq int64
	}{
		{queuedConv.ID, queued.RequestID, 3},
		{runningConv.ID, running.RequestID, 4},
	} {
		tr := f.turn(tc.turn)
		if tr.Status != store.TurnFailed || tr.ErrorCode == nil || *tr.ErrorCode != string(protocol.ServiceRestarted) || !sameTime(tr.EndedAt, &now) {
			t.Fatalf("recovered turn = %+v", tr)
		}
		frames := f.frames(tc.conv)
		if int64(len(frames)) != tc.lastSeq {
			t.Fatalf("conversation has %d frames, want %d", len(frames), tc.lastSeq)
		}
		wantError(t, frames[len(frames)-2], protocol.ServiceRestarted)
		wantDone(t, frames[len(frames)-1], protocol.OutcomeFailed)
		if c := f.get(tc.conv); c.ActiveRequestID != nil {
			t.Fatalf("recovered conversation still active: %+v", c)
		}
	}
	if g := f.turn(done.RequestID); g.Status != store.TurnCompleted {
		t.Fatalf("recovery touched a finished turn: %+v", g)
	}
	if n := len(f.frames(doneConv.ID)); n != len(doneFrames) {
		t.Fatalf("recovery appended to a finished conversation: %d -> %d frames", len(doneFrames), n)
	}
	if n := len(f.frames(idle.ID)); n != 0 {
		t.Fatalf("recovery appended to an idle conversation")
	}
	// A second recovery finds nothing.
	again, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: f.tick()})
	if err != nil || len(again) != 0 {
		t.Fatalf("second recovery = %v, %v", again, err)
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func testSetTurnContext(t *testing.T, f *fixture) {
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	receipt := jsontext.Value(`{"view":{"space":"mission","route":"/"},"history":{"fromSequence":1,"toSequence":1,"hash":"abc"}}`)
	if err := f.s.SetTurnContext(f.ctx, store.SetTurnContextParams{RequestID: tr.RequestID, ContextJSON: receipt, ContextHash: "abc"}); err != nil {
		t.Fatal(err)
	}
	got := f.turn(tr.RequestID)
	if got.ContextHash != "abc" || !jsonEqual(t, got.ContextJSON, receipt) {
		t.Fatalf("turn context = %s / %s", got.ContextJSON, got.ContextHash)
	}
	if got.Status != store.TurnQueued || got.Instruction != tr.Instruction {
		t.Fatalf("SetTurnContext changed more than the context: %+v", got)
	}
	err := f.s.SetTurnContext(f.ctx, store.SetTurnContextParams{RequestID: newID(), ContextJSON: receipt, ContextHash: "abc"})
	wantCode(t, err, protocol.NotFound)
}

// --- frames -------------------------------------------------------------------

func testAppendActive(t *testing.T, f *fixture) {
	c, tr := f.running()
	payloads := []protocol.Payload{
		protocol.ToolCallPayload{CallID: "call-1", Tool: "runs.list", Arguments: jsontext.Value(`{"status":"failed"}`), Mode: "read"},
		protocol.ToolResultPayload{CallID: "call-1", OK: true, Result: jsontext.Value(`{"runs":[]}`)},
		text("No run failed today."),
	}
	now := f.tick()
	frames, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, tr.RequestID, now, payloads...))
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != len(payloads) {
		t.Fatalf("appended %d frames, want %d", len(frames), len(payloads))
	}
	wantSequences(t, frames, 2)
	stored := f.frames(c.ID)[1:]
	for i, fr := range frames {
		want, _ := protocol.EncodePayload(payloads[i])
		if fr.Type != payloads[i].FrameType() || fr.RequestID != tr.RequestID || fr.ConversationID != c.ID || !fr.CreatedAt.Equal(now) {
			t.Fatalf("frame %d = %+v", i, fr)
		}
		if !jsonEqual(t, fr.Payload, want) || !jsonEqual(t, stored[i].Payload, want) {
			t.Fatalf("frame %d payload = %s, stored %s, want %s", i, fr.Payload, stored[i].Payload, want)
		}
		if stored[i].Sequence != fr.Sequence || stored[i].Type != fr.Type || !stored[i].CreatedAt.Equal(now) {
			t.Fatalf("stored frame %d = %+v, returned %+v", i, stored[i], fr)
		}
		// Every stored frame makes a valid wire frame.
		raw := fr.Wire()
		b, err := protocol.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.DecodeFrame(b); err != nil {
			t.Fatalf("frame %d: wire form %s does not decode: %v", i, b, err)
		}
	}
	if g := f.get(c.ID); g.NextSequence != 5 {
		t.Fatalf("next_sequence = %d, want 5", g.NextSequence)
	}
	// A batch of ten gets ten consecutive sequences.
	batch := make([]protocol.Payload, 10)
	for i := range batch {
		batch[i] = text(fmt.Sprint(i))
	}
	wantSequences(t, f.append(c.ID, tr.RequestID, batch...), 5)
}

func testAppendNotActive(t *testing.T, f *fixture) {
	c, tr := f.running()
	before := f.get(c.ID)
	_, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, newID(), f.tick(), text("intruder")))
	wantCode(t, err, protocol.Conflict)

	// A request of another conversation.
	other, otherTurn := f.running()
	_, err = f.s.AppendFrames(f.ctx, appendParams(c.ID, otherTurn.RequestID, f.tick(), text("wrong conversation")))
	wantCode(t, err, protocol.Conflict)

	// A finished request, in a conversation with no active turn.
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	before = f.get(c.ID)
	_, err = f.s.AppendFrames(f.ctx, appendParams(c.ID, tr.RequestID, f.tick(), text("late")))
	wantCode(t, err, protocol.Conflict)
	if after := f.get(c.ID); after.NextSequence != before.NextSequence {
		t.Fatalf("refused appends moved next_sequence %d -> %d", before.NextSequence, after.NextSequence)
	}
	if n := len(f.frames(other.ID)); n != 1 {
		t.Fatalf("other conversation has %d frames, want 1", n)
	}

	_, err = f.s.AppendFrames(f.ctx, appendParams(newID(), tr.RequestID, f.tick(), text("nowhere")))
	wantCode(t, err, protocol.NotFound)
}

func testAppendInvalid(t *testing.T, f *fixture) {
	c, tr := f.running()
	for _, p := range []protocol.Payload{
		protocol.TextPayload{Content: "x", Format: "html"},
		protocol.ErrorPayload{Error: protocol.Error{Code: "bogus"}},
		protocol.ToolCallPayload{CallID: "c", Tool: "t", Arguments: jsontext.Value(`[]`), Mode: "read"},
		nil,
	} {
		// The invalid payload comes second: the valid first one must not stay.
		_, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, tr.RequestID, f.tick(), text("ok"), p))
		wantCode(t, err, protocol.Validation)
	}
	if g := f.get(c.ID); g.NextSequence != 2 {
		t.Fatalf("invalid appends moved next_sequence to %d", g.NextSequence)
	}
	if n := len(f.frames(c.ID)); n != 1 {
		t.Fatalf("invalid appends left %d frames", n)
	}
}

// testAppendDone: only FinishTurn writes done, in the transaction that ends
// the turn (DESIGN.md §7); AppendFrames carrying one would let a turn end
// twice or leave the conversation claimed after its done frame.
func testAppendDone(t *testing.T, f *fixture) {
	c, tr := f.running()
	_, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, tr.RequestID, f.tick(),
		protocol.DonePayload{Outcome: protocol.OutcomeCompleted, LastSequence: 2}))
	wantCode(t, err, protocol.Validation)
	if g := f.get(c.ID); g.NextSequence != 2 || g.ActiveRequestID == nil {
		t.Fatalf("refused done append changed the conversation: %+v", g)
	}
}

func testAppendConcurrent(t *testing.T, f *fixture) {
	c, tr := f.running()
	const writers = 50
	results := make([][]store.Frame, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			// Writers append 1, 2 or 3 frames: each batch must stay contiguous.
			payloads := make([]protocol.Payload, 1+i%3)
			for j := range payloads {
				payloads[j] = text(fmt.Sprintf("w%d-%d", i, j))
			}
			results[i], errs[i] = f.s.AppendFrames(f.ctx, appendParams(c.ID, tr.RequestID, f.clock.Now(), payloads...))
		})
	}
	wg.Wait()
	total := 1 // the user frame
	seen := map[int64]string{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if len(results[i]) != 1+i%3 {
			t.Fatalf("writer %d got %d frames", i, len(results[i]))
		}
		wantSequences(t, results[i], results[i][0].Sequence)
		for j, fr := range results[i] {
			if prev, dup := seen[fr.Sequence]; dup {
				t.Fatalf("sequence %d given twice (%s and writer %d)", fr.Sequence, prev, i)
			}
			seen[fr.Sequence] = fmt.Sprintf("writer %d frame %d", i, j)
			if !jsonEqual(t, fr.Payload, mustEncode(t, text(fmt.Sprintf("w%d-%d", i, j)))) {
				t.Fatalf("writer %d frame %d carries %s", i, j, fr.Payload)
			}
		}
		total += len(results[i])
	}
	stored := f.frames(c.ID)
	if len(stored) != total {
		t.Fatalf("%d frames stored, want %d", len(stored), total)
	}
	wantSequences(t, stored, 1)
	if g := f.get(c.ID); g.NextSequence != int64(total)+1 {
		t.Fatalf("next_sequence = %d, want %d", g.NextSequence, total+1)
	}
}

func mustEncode(t *testing.T, p protocol.Payload) []byte {
	t.Helper()
	b, err := protocol.EncodePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testListFramesPaging(t *testing.T, f *fixture) {
	c, tr := f.running()
	other, otherTurn := f.running()
	for i := range 37 {
		f.append(c.ID, tr.RequestID, text(fmt.Sprint(i)))
		if i%5 == 0 {
			f.append(other.ID, otherTurn.RequestID, text("noise"))
		}
	}
	const total = 38
	for _, limit := range []int{1, 5, 37, 38, 100} {
		var got []store.Frame
		var after int64
		for range total + 2 {
			page, err := f.s.ListFrames(f.ctx, store.ListFramesParams{ConversationID: c.ID, AfterSequence: after, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			if page[0].Sequence != after+1 {
				t.Fatalf("limit %d: page after %d starts at %d", limit, after, page[0].Sequence)
			}
			wantSequences(t, page, after+1)
			got = append(got, page...)
			after = page[len(page)-1].Sequence
		}
		if len(got) != total {
			t.Fatalf("limit %d: paged %d frames, want %d", limit, len(got), total)
		}
		for _, fr := range got {
			if fr.ConversationID != c.ID {
				t.Fatalf("frame of conversation %s listed", fr.ConversationID)
			}
		}
	}
	// From the middle, and beyond the tail.
	page, err := f.s.ListFrames(f.ctx, store.ListFramesParams{ConversationID: c.ID, AfterSequence: 30, Limit: 100})
	if err != nil || len(page) != 8 || page[0].Sequence != 31 {
		t.Fatalf("after 30: %d frames, %v", len(page), err)
	}
	page, err = f.s.ListFrames(f.ctx, store.ListFramesParams{ConversationID: c.ID, AfterSequence: total, Limit: 100})
	if err != nil || len(page) != 0 {
		t.Fatalf("after the tail: %d frames, %v", len(page), err)
	}
	page, err = f.s.ListFrames(f.ctx, store.ListFramesParams{ConversationID: newID(), Limit: 100})
	if err != nil || len(page) != 0 {
		t.Fatalf("unknown conversation: %d frames, %v", len(page), err)
	}
}

// --- signals ------------------------------------------------------------------

func testSignalAppend(t *testing.T, f *fixture) {
	a, ta := f.running()
	b, tb := f.running()
	sigA := f.s.FrameSignal(a.ID)
	sigB := f.s.FrameSignal(b.ID)
	if isClosed(sigA) || isClosed(sigB) {
		t.Fatal("a fresh frame signal is already closed")
	}
	f.append(b.ID, tb.RequestID, text("to b"))
	waitClosed(t, sigB, "append to b")
	// b's commit has been delivered; a's signal must still be open.
	if isClosed(sigA) {
		t.Fatal("a commit to another conversation closed the signal")
	}
	// A refused append commits nothing and need not wake anyone; a real one must.
	f.append(a.ID, ta.RequestID, text("to a"))
	waitClosed(t, sigA, "append to a")
	// The next signal waits for the next commit.
	next := f.s.FrameSignal(a.ID)
	if isClosed(next) {
		t.Fatal("the signal taken after a commit is already closed")
	}
	f.append(a.ID, ta.RequestID, text("again"))
	waitClosed(t, next, "second append to a")
}

func testSignalTurn(t *testing.T, f *fixture) {
	c := f.conversation()
	sig := f.s.FrameSignal(c.ID)
	tr, _ := f.submit(c.ID)
	waitClosed(t, sig, "submit")

	sig = f.s.FrameSignal(c.ID)
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	waitClosed(t, sig, "finish")

	tr, _ = f.submit(c.ID)
	sig = f.s.FrameSignal(c.ID)
	cancel(t, f, tr.RequestID)
	waitClosed(t, sig, "cancel of a queued turn")

	tr, _ = f.submit(c.ID)
	sig = f.s.FrameSignal(c.ID)
	if _, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "recovery")
	if g := f.turn(tr.RequestID); g.Status != store.TurnFailed {
		t.Fatalf("recovered turn is %s", g.Status)
	}
}

// --- stream tickets -------------------------------------------------------------

func ticket(t *testing.T, f *fixture, convID string, after int64, ttl time.Duration) store.CreateStreamTicketParams {
	t.Helper()
	now := f.tick()
	p := store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: convID, AfterSequence: after, ExpiresAt: now.Add(ttl), Now: now}
	if err := f.s.CreateStreamTicket(f.ctx, p); err != nil {
		t.Fatalf("CreateStreamTicket: %v", err)
	}
	return p
}

func testTicketRedeemOnce(t *testing.T, f *fixture) {
	c := f.conversation()
	p := ticket(t, f, c.ID, 7, time.Minute)
	now := f.tick()
	got, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got.TicketHash != p.TicketHash || got.ConversationID != c.ID || got.AfterSequence != 7 ||
		!got.ExpiresAt.Equal(p.ExpiresAt) || !got.CreatedAt.Equal(p.Now) || !sameTime(got.UsedAt, &now) {
		t.Fatalf("redeemed ticket = %+v, created %+v", got, p)
	}
	_, err = f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
}

func testTicketExpired(t *testing.T, f *fixture) {
	c := f.conversation()
	p := ticket(t, f, c.ID, 0, time.Minute)
	_, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: p.ExpiresAt.Add(time.Millisecond)})
	wantCode(t, err, protocol.AuthRequired)
}

func testTicketUnknown(t *testing.T, f *fixture) {
	_, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: newID(), Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
}

func testTicketMissingConversation(t *testing.T, f *fixture) {
	now := f.tick()
	err := f.s.CreateStreamTicket(f.ctx, store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: newID(), ExpiresAt: now.Add(time.Minute), Now: now})
	if err == nil {
		t.Fatal("a ticket for a missing conversation was stored")
	}
}

func testTicketConcurrent(t *testing.T, f *fixture) {
	c := f.conversation()
	p := ticket(t, f, c.ID, 0, time.Minute)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: p.Now.Add(time.Second)})
		})
	}
	wg.Wait()
	var ok int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case protocol.IsCode(err, protocol.AuthRequired):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent redemptions succeeded, want exactly 1", ok)
	}
}

// --- admin events ---------------------------------------------------------------

func testAdminEvents(t *testing.T, f *fixture) {
	type ev struct {
		action, target string
	}
	events := []ev{
		{"studio.operator.command", "p1"},
		{"studio.operator.command", "p2"},
		{"studio.maintenance", ""},
		{"studio.operator.command", "p1"},
		{"studio.maintenance", "p1"},
	}
	var appended []store.AdminEvent
	for i, e := range events {
		var target *string
		if e.target != "" {
			target = ptr(e.target)
		}
		details := jsontext.Value(fmt.Sprintf(`{"decision":"confirmed","n":%d}`, i))
		if i == 2 {
			details = nil
		}
		now := f.tick()
		got, err := f.s.AppendAdminEvent(f.ctx, store.AppendAdminEventParams{Actor: "studio_operator", Action: e.action, TargetID: target, Details: details, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID <= 0 || (i > 0 && got.ID <= appended[i-1].ID) {
			t.Fatalf("event %d has id %d after %v", i, got.ID, appended)
		}
		if got.Actor != "studio_operator" || got.Action != e.action || !sameTime(&got.CreatedAt, &now) || !slices.Equal(ptrSlice(got.TargetID), ptrSlice(target)) {
			t.Fatalf("event %d = %+v", i, got)
		}
		appended = append(appended, got)
	}
	all, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(events) {
		t.Fatalf("listed %d events, want %d", len(all), len(events))
	}
	for i, e := range all {
		want := appended[len(appended)-1-i]
		if e.ID != want.ID || e.Action != want.Action || !e.CreatedAt.Equal(want.CreatedAt) || !slices.Equal(ptrSlice(e.TargetID), ptrSlice(want.TargetID)) {
			t.Fatalf("event %d = %+v, want %+v (newest first)", i, e, want)
		}
		wantDetails := want.Details
		if len(wantDetails) == 0 {
			wantDetails = jsontext.Value(`{}`)
		}
		if !jsonEqual(t, e.Details, wantDetails) {
			t.Fatalf("event %d details = %s, want %s", i, e.Details, wantDetails)
		}
	}
	if !jsonEqual(t, appended[2].Details, []byte(`{}`)) {
		t.Fatalf("nil details stored as %s, want {}", appended[2].Details)
	}

	idsOf := func(es []store.AdminEvent) []int64 {
		out := make([]int64, len(es))
		for i, e := range es {
			out[i] = e.ID
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    store.ListAdminEventsParams
		want []int64
	}{
		{"action", store.ListAdminEventsParams{Action: "studio.operator.command"}, []int64{appended[3].ID, appended[1].ID, appended[0].ID}},
		{"target", store.ListAdminEventsParams{TargetID: "p1"}, []int64{appended[4].ID, appended[3].ID, appended[0].ID}},
		{"action and target", store.ListAdminEventsParams{Action: "studio.operator.command", TargetID: "p1"}, []int64{appended[3].ID, appended[0].ID}},
		{"limit", store.ListAdminEventsParams{Limit: 2}, []int64{appended[4].ID, appended[3].ID}},
		{"before", store.ListAdminEventsParams{BeforeID: appended[3].ID, Limit: 2}, []int64{appended[2].ID, appended[1].ID}},
		{"before, filtered", store.ListAdminEventsParams{Action: "studio.operator.command", BeforeID: appended[3].ID}, []int64{appended[1].ID, appended[0].ID}},
		{"no match", store.ListAdminEventsParams{Action: "nothing"}, []int64{}},
	} {
		got, err := f.s.ListAdminEvents(f.ctx, tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(idsOf(got), tc.want) {
			t.Fatalf("%s: ids %v, want %v", tc.name, idsOf(got), tc.want)
		}
	}
}
