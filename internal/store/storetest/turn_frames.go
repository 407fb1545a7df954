package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// testTurnFramesManyTurns reads each turn's frames of a conversation of
// many turns (run, waited behind another, forked, partly purged) by
// request: CountFrames and ListFrames with a RequestID find that turn's
// frames and no other's, and the search finds each turn's text. The
// backends read them within the turn's range of sequences.
func testTurnFramesManyTurns(t *testing.T, f *fixture) {
	c := f.conversation()
	want := map[string][]int64{} // request id: its frames' sequences
	record := func(req string, frames ...store.Frame) {
		for _, fr := range frames {
			want[req] = append(want[req], fr.Sequence)
		}
	}
	var order []string
	for i := range 24 {
		tr, first := f.submit(c.ID)
		record(tr.RequestID, first)
		order = append(order, tr.RequestID)
		if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
			t.Fatal(err)
		}
		for j := range i % 5 {
			record(tr.RequestID, f.append(c.ID, tr.RequestID,
				protocol.TextPayload{Content: fmt.Sprintf("word%dx%d ", i, j), Format: "markdown", Role: protocol.RoleAssistant})...)
		}
		if i%6 == 3 { // one waits behind this one, and becomes the next turn when it ends
			w := f.submitWhen(c.ID, protocol.WhenBusyEnqueue)
			record(tr.RequestID, f.finish(tr.RequestID, store.TurnCompleted, nil)...)
			all := f.frames(c.ID)
			record(w.RequestID, all[len(all)-1]) // its instruction, stored when the other ended
			order = append(order, w.RequestID)
			if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: w.RequestID, Now: f.tick()}); err != nil {
				t.Fatal(err)
			}
			record(w.RequestID, f.append(c.ID, w.RequestID,
				protocol.TextPayload{Content: fmt.Sprintf("waited%d", i), Format: "markdown", Role: protocol.RoleAssistant})...)
			record(w.RequestID, f.finish(w.RequestID, store.TurnCompleted, nil)...)
			continue
		}
		record(tr.RequestID, f.finish(tr.RequestID, store.TurnCompleted, nil)...)
	}
	check := func(convID string, want map[string][]int64, order []string) {
		t.Helper()
		for _, req := range order {
			n, err := f.s.CountFrames(f.ctx, store.CountFramesParams{ConversationID: convID, RequestID: req})
			if err != nil || n != int64(len(want[req])) {
				t.Errorf("CountFrames(%s) = %d, %v; want %d", req, n, err, len(want[req]))
			}
			var got []int64
			for after := int64(0); ; {
				page, err := f.s.ListFrames(f.ctx, store.ListFramesParams{ConversationID: convID, RequestID: req, AfterSequence: after, Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				for _, fr := range page {
					if fr.RequestID != req {
						t.Fatalf("ListFrames(%s) gave frame %d of %s", req, fr.Sequence, fr.RequestID)
					}
					got = append(got, fr.Sequence)
				}
				if len(page) < 2 {
					break
				}
				after = page[len(page)-1].Sequence
			}
			if !slices.Equal(got, want[req]) {
				t.Errorf("ListFrames(%s) = %v; want %v", req, got, want[req])
			}
		}
	}
	check(c.ID, want, order)
	for _, term := range []string{"word19x3", "waited9"} {
		if got := f.search(term); !slices.Contains(got, c.ID) {
			t.Errorf("search %q = %v; want the conversation", term, got)
		}
	}

	// A fork through the 12th turn's done frame: its turns are its own,
	// their frames renumbered.
	through := want[order[11]][len(want[order[11]])-1]
	fork := f.fork(c.ID, &through)
	fw := map[string][]int64{}
	var forder []string
	for _, fr := range f.frames(fork.ID) {
		if len(forder) == 0 || forder[len(forder)-1] != fr.RequestID {
			forder = append(forder, fr.RequestID)
		}
		fw[fr.RequestID] = append(fw[fr.RequestID], fr.Sequence)
	}
	if len(forder) != 12 {
		t.Fatalf("fork has %d turns; want 12", len(forder))
	}
	for i, req := range forder {
		if len(fw[req]) != len(want[order[i]]) {
			t.Errorf("fork's turn %d has %d frames; its source %d", i, len(fw[req]), len(want[order[i]]))
		}
	}
	check(fork.ID, fw, forder)
	// The fork's own next turn, and its text found.
	tr, first := f.submit(fork.ID)
	if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	fw[tr.RequestID] = append(fw[tr.RequestID], first.Sequence)
	for _, fr := range f.append(fork.ID, tr.RequestID, protocol.TextPayload{Content: "forkedword", Format: "markdown", Role: protocol.RoleAssistant}) {
		fw[tr.RequestID] = append(fw[tr.RequestID], fr.Sequence)
	}
	for _, fr := range f.finish(tr.RequestID, store.TurnCompleted, nil) {
		fw[tr.RequestID] = append(fw[tr.RequestID], fr.Sequence)
	}
	check(fork.ID, fw, append(forder, tr.RequestID))
	if got := f.search("forkedword"); !slices.Equal(got, []string{fork.ID}) {
		t.Errorf("search forkedword = %v; want the fork", got)
	}

	// The first turns purged: theirs count nothing; the others are whole.
	cut := want[order[5]][0]
	if _, err := f.s.PurgeFrames(f.ctx, store.PurgeFramesParams{ConversationID: c.ID, BeforeSequence: cut, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	for _, req := range order[:5] {
		want[req] = nil
	}
	check(c.ID, want, order)
}
