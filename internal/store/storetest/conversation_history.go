package storetest

import (
	"slices"
	"strings"
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

func amendParams(f *fixture, orig store.Proposal) store.AmendProposalParams {
	np := f.newProposal(orig.ConversationID, orig.RequestID)
	np.CallID = orig.CallID
	np.Command = []byte(`{"args":{"a":"9","b":"2"},"playbook":"audit-repo"}`)
	np.CommandHash = "amended-hash"
	now := f.tick()
	return store.AmendProposalParams{ID: orig.ID, Proposal: np, Audit: proposalAudit(orig.ID, protocol.DecisionDenied, now), Now: now,
		Link: store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AmendAction, TargetID: ptr(orig.ID),
			Details: []byte(`{"proposal_id":"` + orig.ID + `","amended_by":"` + np.ID + `"}`), Now: now}}
}

func testAmend(t *testing.T, f *fixture) {
	c, tr := f.running()
	orig := f.propose(c.ID, tr.RequestID)
	f.park(tr.RequestID, true)
	lastBefore := f.get(c.ID).LastSequence()
	before := f.auditCount()
	p := amendParams(f, orig)
	got, err := f.s.AmendProposal(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != p.Proposal.ID || got.Status != store.ProposalPending || got.AmendedFrom == nil || *got.AmendedFrom != orig.ID ||
		got.CallID != orig.CallID || got.CommandHash != "amended-hash" {
		t.Fatalf("amended = %+v", got)
	}
	was := f.proposal(orig.ID)
	if was.Status != store.ProposalCancelled || was.ErrorCode == nil || *was.ErrorCode != protocol.ReasonAmended || was.CompletedAt == nil {
		t.Fatalf("original = %+v", was)
	}
	if f.auditCount() != before+2 || len(f.audits(orig.ID)) != 2 {
		t.Fatal("amend did not write its two audit rows (the close and the link)")
	}
	if f.turn(tr.RequestID).Status != store.TurnAwaitingConfirmation {
		t.Fatal("the turn stopped waiting for the human")
	}
	frames := f.frames(c.ID)[lastBefore:]
	if len(frames) != 3 {
		t.Fatalf("amend frames = %d", len(frames))
	}
	if cp := payloadOf(t, frames[0]).(protocol.ConfirmationPayload); cp.ProposalID != orig.ID || cp.State != protocol.ConfirmationAmended {
		t.Fatalf("frame 1 = %+v", cp)
	}
	if pp := payloadOf(t, frames[1]).(protocol.ProposalPayload); pp.Proposal.ID != got.ID || pp.Proposal.Amends == nil || *pp.Proposal.Amends != orig.ID {
		t.Fatalf("frame 2 = %+v", pp)
	}
	if cp := payloadOf(t, frames[2]).(protocol.ConfirmationPayload); cp.ProposalID != got.ID || cp.State != protocol.ConfirmationRequired {
		t.Fatalf("frame 3 = %+v", cp)
	}
	// The amended proposal goes on like any other.
	f.confirm(got)
}

func testAmendNotPending(t *testing.T, f *fixture) {
	c, tr := f.running()
	orig := f.propose(c.ID, tr.RequestID)
	f.confirm(orig)
	before, frames := f.auditCount(), len(f.frames(c.ID))
	_, err := f.s.AmendProposal(f.ctx, amendParams(f, orig))
	pe := wantCode(t, err, protocol.Conflict)
	if pe.Details["status"] != string(store.ProposalExecuting) {
		t.Fatalf("details = %v", pe.Details)
	}
	// A proposal of another call cannot pose as the amendment.
	c2, tr2 := f.running()
	orig2 := f.propose(c2.ID, tr2.RequestID)
	p := amendParams(f, orig2)
	p.Proposal.CallID = "call_other"
	_, err = f.s.AmendProposal(f.ctx, p)
	wantCode(t, err, protocol.Validation)
	if f.proposal(orig2.ID).Status != store.ProposalPending {
		t.Fatal("a refused amend changed the original")
	}
	if f.auditCount() != before || len(f.frames(c.ID)) != frames {
		t.Fatal("a refused amend wrote something")
	}
}
