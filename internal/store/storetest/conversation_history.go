package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExerciseConversationHistory runs the subtests of a conversation's choices and history: pinning,
// search over titles and turn text, restoring a deleted conversation
// within the recovery window, a model per conversation, forks, and
// amended proposals.
func ExerciseConversationHistory(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("Pin/FirstInListsAndPaging", testPinFirst)
	run("Model/SetClearArchived", testModelChoice)
	run("Search/TitlesAndTurnText", testSearch)
	run("Search/PurgeAndForkKeepTheIndexTrue", testSearchPurgeFork)
	run("Restore/WithinWindowAudited", testRestore)
	run("Restore/RefusedOutsideWindowOrNotDeleted", testRestoreRefused)
	run("Fork/CopiesCompleteTurnsResequenced", testForkCopies)
	run("Fork/RefusesInnerSequenceNamingBoundaries", testForkBoundary)
	run("Fork/DefaultEmptyAndDeletedSource", testForkDefaults)
	run("Fork/ProposalsAndEffectsNotLive", testForkNotLive)
	run("Fork/SurvivesSourcePurgeAndStartsAfterPurgedFrames", testForkPurges)
	run("Amend/ReplacesPendingProposal", testAmend)
	run("Amend/RefusedWhenNotPending", testAmendNotPending)
}

// completeTurn runs one whole turn in the conversation: the instruction,
// the assistant's text deltas as given, and done(completed).
func (f *fixture) completeTurn(convID string, deltas ...string) store.Turn {
	f.t.Helper()
	tr, _ := f.submit(convID)
	if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
		f.t.Fatal(err)
	}
	for _, d := range deltas {
		f.append(convID, tr.RequestID, protocol.TextPayload{Content: d, Format: "markdown", Role: protocol.RoleAssistant})
	}
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	return f.turn(tr.RequestID)
}

func (f *fixture) update(p store.UpdateConversationParams) store.Conversation {
	f.t.Helper()
	p.Now = f.tick()
	c, err := f.s.UpdateConversation(f.ctx, p)
	if err != nil {
		f.t.Fatalf("UpdateConversation: %v", err)
	}
	return c
}

func (f *fixture) search(terms ...string) []string {
	f.t.Helper()
	return ids(list(f.t, f, store.ListConversationsParams{Terms: terms, Limit: 100}))
}

func (f *fixture) fork(src string, upTo *int64) store.Conversation {
	f.t.Helper()
	c, err := f.s.ForkConversation(f.ctx, store.ForkConversationParams{SourceID: src, ID: newID(), UpToSequence: upTo,
		NewRequestID: newID, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("ForkConversation: %v", err)
	}
	return c
}

func testPinFirst(t *testing.T, f *fixture) {
	var all []store.Conversation
	for range 5 {
		all = append(all, f.conversation())
	}
	// Newest first is 4 3 2 1 0; pinning 1 and 3 lists 3 1 4 2 0.
	f.update(store.UpdateConversationParams{ID: all[1].ID, Pinned: ptr(true)})
	pinned := f.update(store.UpdateConversationParams{ID: all[3].ID, Pinned: ptr(true)})
	if !pinned.Pinned || !f.get(all[1].ID).Pinned || f.get(all[0].ID).Pinned {
		t.Fatalf("pinned flags: %+v", pinned)
	}
	want := []string{all[3].ID, all[1].ID, all[4].ID, all[2].ID, all[0].ID}
	if got := ids(list(t, f, store.ListConversationsParams{Limit: 10})); !slices.Equal(got, want) {
		t.Fatalf("list = %v, want %v", got, want)
	}
	// Paging two at a time crosses the pinned/unpinned edge without a gap or repeat.
	var paged []string
	p := store.ListConversationsParams{Limit: 2}
	for {
		page := list(t, f, p)
		paged = append(paged, ids(page)...)
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		at := last.CreatedAt
		p.AfterPinned, p.AfterCreated, p.AfterID = last.Pinned, &at, last.ID
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged = %v, want %v", paged, want)
	}
	// Pinning is filing: an archived conversation can be pinned and unpinned.
	f.update(store.UpdateConversationParams{ID: all[0].ID, Status: ptr(store.ConversationArchived)})
	if c := f.update(store.UpdateConversationParams{ID: all[0].ID, Pinned: ptr(true)}); !c.Pinned || c.Status != store.ConversationArchived {
		t.Fatalf("pin archived: %+v", c)
	}
	if c := f.update(store.UpdateConversationParams{ID: all[3].ID, Pinned: ptr(false)}); c.Pinned {
		t.Fatal("unpin kept the pin")
	}
}

func testModelChoice(t *testing.T, f *fixture) {
	c := f.conversation()
	if c.Model != nil {
		t.Fatalf("new conversation model = %v", *c.Model)
	}
	if got := f.update(store.UpdateConversationParams{ID: c.ID, Model: ptr("local")}); got.Model == nil || *got.Model != "local" {
		t.Fatalf("model = %v", got.Model)
	}
	if got := f.get(c.ID); got.Model == nil || *got.Model != "local" {
		t.Fatal("model not stored")
	}
	if got := f.update(store.UpdateConversationParams{ID: c.ID, Model: ptr("")}); got.Model != nil {
		t.Fatalf("cleared model = %v", *got.Model)
	}
	f.update(store.UpdateConversationParams{ID: c.ID, Status: ptr(store.ConversationArchived)})
	_, err := f.s.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: c.ID, Model: ptr("claude"), Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	got := f.update(store.UpdateConversationParams{ID: c.ID, Model: ptr("claude"), Status: ptr(store.ConversationActive)})
	if got.Model == nil || *got.Model != "claude" || got.Status != store.ConversationActive {
		t.Fatalf("unarchive with model: %+v", got)
	}
}

func testSearch(t *testing.T, f *fixture) {
	deploy := f.conversation()
	f.update(store.UpdateConversationParams{ID: deploy.ID, Title: ptr("Deployment checklist")})
	texty := f.conversation()
	// Deltas cut words: the turn's text is searched as it reads.
	f.completeTurn(texty.ID, "The nightly sched", "ule failed twice; ", "from the runner")
	other := f.conversation()
	f.completeTurn(other.ID, "nothing to see")
	running, tr := f.running()
	f.append(running.ID, tr.RequestID, text("schedule pending"))

	for _, tc := range []struct {
		terms []string
		want  []string
	}{
		{[]string{"deployment"}, []string{deploy.ID}},
		{[]string{"deploy"}, []string{deploy.ID}},           // a prefix
		{[]string{"schedule"}, []string{texty.ID}},          // across deltas; the running turn is not indexed yet
		{[]string{"schedule", "twice"}, []string{texty.ID}}, // every term
		{[]string{"schedule", "checklist"}, nil},            // in different conversations
		{[]string{"show"}, []string{other.ID, texty.ID}},    // the instruction is turn text too
		{[]string{"absent"}, nil},
	} {
		got := f.search(tc.terms...)
		want := tc.want
		if want == nil {
			want = []string{}
		}
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("search %v = %v, want %v", tc.terms, got, want)
		}
	}
	// A renamed title is searched by its new words only; the running turn's text once it is done.
	f.update(store.UpdateConversationParams{ID: deploy.ID, Title: ptr("Release notes")})
	if got := f.search("deployment"); len(got) != 0 {
		t.Errorf("old title still found: %v", got)
	}
	if got := f.search("release"); !slices.Equal(got, []string{deploy.ID}) {
		t.Errorf("new title: %v", got)
	}
	f.finish(tr.RequestID, store.TurnCompleted, nil)
	if got := f.search("pending"); !slices.Equal(got, []string{running.ID}) {
		t.Errorf("finished turn's text: %v", got)
	}
	// Search narrows the status filter, and pinned still lists first.
	f.update(store.UpdateConversationParams{ID: texty.ID, Status: ptr(store.ConversationArchived)})
	if got := ids(list(t, f, store.ListConversationsParams{Terms: []string{"schedule"}, Status: store.ConversationActive})); !slices.Equal(got, []string{running.ID}) {
		t.Errorf("active and schedule: %v", got)
	}
	f.update(store.UpdateConversationParams{ID: texty.ID, Pinned: ptr(true)})
	if got := f.search("schedule"); !slices.Equal(got, []string{texty.ID, running.ID}) {
		t.Errorf("pinned first in search: %v", got)
	}
}

func testSearchPurgeFork(t *testing.T, f *fixture) {
	c := f.conversation()
	first := f.completeTurn(c.ID, "alpha words")
	f.completeTurn(c.ID, "beta words")
	fork := f.fork(c.ID, nil)
	if got := f.search("alpha"); !slices.Equal(got, []string{fork.ID, c.ID}) {
		t.Fatalf("alpha in source and fork: %v", got)
	}
	// Purging the first turn's frames removes it from the search, in the source only.
	frames := f.frames(c.ID)
	var firstDone int64
	for _, fr := range frames {
		if fr.RequestID == first.RequestID && fr.Type == protocol.FrameDone {
			firstDone = fr.Sequence
		}
	}
	if _, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: firstDone + 1, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if got := f.search("alpha"); !slices.Equal(got, []string{fork.ID}) {
		t.Fatalf("alpha after purge: %v", got)
	}
	if got := f.search("beta"); !slices.Equal(got, []string{fork.ID, c.ID}) {
		t.Fatalf("beta after purge: %v", got)
	}
	// Purging the deleted source removes its documents; the fork's stay.
	if _, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: c.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.PurgeDeletedConversations(f.ctx, store.PurgeDeletedConversationsParams{DeletedBefore: f.tick()}); err != nil {
		t.Fatal(err)
	}
	if got := f.search("beta"); !slices.Equal(got, []string{fork.ID}) {
		t.Fatalf("beta after the source's purge: %v", got)
	}
}

func (f *fixture) deleteConv(id string) store.Conversation {
	f.t.Helper()
	c, err := f.s.DeleteConversation(f.ctx, store.DeleteConversationParams{ID: id, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("DeleteConversation: %v", err)
	}
	return c
}

func restoreAudit(id string, now time.Time) store.AppendAdminEventParams {
	return store.AppendAdminEventParams{Actor: "studio_cockpit", Action: "studio.operator.conversation.restore", TargetID: ptr(id),
		Details: []byte(`{"conversationId":"` + id + `"}`), Now: now}
}

func testRestore(t *testing.T, f *fixture) {
	active, archived := f.conversation(), f.conversation()
	f.completeTurn(active.ID, "kept")
	f.update(store.UpdateConversationParams{ID: archived.ID, Status: ptr(store.ConversationArchived)})
	windowStart := f.tick()
	for _, c := range []store.Conversation{active, archived} {
		f.deleteConv(c.ID)
	}
	deleted := list(t, f, store.ListConversationsParams{Status: store.ConversationDeleted, DeletedAfter: &windowStart, Limit: 10})
	if got := ids(deleted); !slices.Equal(got, []string{archived.ID, active.ID}) {
		t.Fatalf("deleted within the window = %v", got)
	}
	before := f.auditCount()
	for _, tc := range []struct {
		id   string
		want store.ConversationStatus
	}{{active.ID, store.ConversationActive}, {archived.ID, store.ConversationArchived}} {
		now := f.tick()
		c, err := f.s.RestoreConversation(f.ctx, store.RestoreConversationParams{ID: tc.id, DeletedAfter: windowStart,
			Audit: restoreAudit(tc.id, now), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != tc.want || c.DeletedAt != nil {
			t.Fatalf("restored %s: status %s deletedAt %v, want %s", tc.id, c.Status, c.DeletedAt, tc.want)
		}
		if rows := f.audits(tc.id); len(rows) != 1 || rows[0].Action != "studio.operator.conversation.restore" {
			t.Fatalf("audit rows of the restore: %+v", rows)
		}
	}
	if f.auditCount() != before+2 {
		t.Fatalf("audit rows: %d, want %d", f.auditCount(), before+2)
	}
	if got := f.frames(active.ID); len(got) != 3 {
		t.Fatalf("restored conversation has %d frames, want 3", len(got))
	}
	if got := list(t, f, store.ListConversationsParams{Status: store.ConversationDeleted, Limit: 10}); len(got) != 0 {
		t.Fatalf("still listed deleted: %v", ids(got))
	}
}

func testRestoreRefused(t *testing.T, f *fixture) {
	old, live := f.conversation(), f.conversation()
	f.deleteConv(old.ID)
	windowStart := f.tick()
	before := f.auditCount()
	now := f.tick()
	_, err := f.s.RestoreConversation(f.ctx, store.RestoreConversationParams{ID: old.ID, DeletedAfter: windowStart, Audit: restoreAudit(old.ID, now), Now: now})
	wantCode(t, err, protocol.NotFound)
	if got := ids(list(t, f, store.ListConversationsParams{Status: store.ConversationDeleted, DeletedAfter: &windowStart})); len(got) != 0 {
		t.Fatalf("deleted before the window listed: %v", got)
	}
	_, err = f.s.RestoreConversation(f.ctx, store.RestoreConversationParams{ID: live.ID, DeletedAfter: windowStart, Audit: restoreAudit(live.ID, now), Now: now})
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["status"] != "active" {
		t.Fatalf("details = %v", pe.Details)
	}
	_, err = f.s.RestoreConversation(f.ctx, store.RestoreConversationParams{ID: newID(), DeletedAfter: windowStart, Audit: restoreAudit(live.ID, now), Now: now})
	wantCode(t, err, protocol.NotFound)
	if f.auditCount() != before {
		t.Fatal("a refused restore left an audit row")
	}
	if f.get(old.ID).Status != store.ConversationDeleted {
		t.Fatal("a refused restore changed the conversation")
	}
}
