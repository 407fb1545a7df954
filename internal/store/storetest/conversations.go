package storetest

import (
	"slices"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

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
