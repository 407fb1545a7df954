package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// testAppendMany: one append of many frames (a pipelined turn's queue, a
// backend writing them in several multi-row statements) stores each once,
// in order, with the sequences that follow, and the next append goes on
// after them.
func testAppendMany(t *testing.T, f *fixture) {
	c, tr := f.running()
	for _, n := range []int{1, 7, 341} { // 341: 256 + 64 + 16 + 4 + 1
		before := f.get(c.ID).NextSequence
		payloads := make([]protocol.Payload, n)
		for i := range payloads {
			payloads[i] = text(fmt.Sprintf("frame %d of %d", i, n))
		}
		frames, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, tr.RequestID, f.tick(), payloads...))
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != n {
			t.Fatalf("appended %d frames, want %d", len(frames), n)
		}
		wantSequences(t, frames, before)
		stored := f.frames(c.ID)
		stored = stored[len(stored)-n:]
		for i, fr := range stored {
			want, _ := protocol.EncodePayload(payloads[i])
			if fr.Sequence != before+int64(i) || !jsonEqual(t, fr.Payload, want) {
				t.Fatalf("stored frame %d of %d: sequence %d payload %s, want %d %s", i, n, fr.Sequence, fr.Payload, before+int64(i), want)
			}
		}
		if g := f.get(c.ID); g.NextSequence != before+int64(n) {
			t.Fatalf("next_sequence = %d after %d frames from %d", g.NextSequence, n, before)
		}
	}
}

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
// the turn (docs/design.md §6); AppendFrames carrying one would let a turn end
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

func testCountFrames(t *testing.T, f *fixture) {
	c, tr := f.running()
	other, otherTurn := f.running()
	for i := range 7 {
		f.append(c.ID, tr.RequestID, text(fmt.Sprint(i)))
		f.append(other.ID, otherTurn.RequestID, text("noise"))
	}
	f.append(c.ID, tr.RequestID, protocol.ToolCallPayload{CallID: "c1", Tool: "list_flags", Arguments: jsontext.Value(`{}`), Mode: "read"})
	f.append(c.ID, tr.RequestID, protocol.ToolCallPayload{CallID: "c2", Tool: "list_flags", Arguments: jsontext.Value(`{}`), Mode: "read"})
	for _, tc := range []struct {
		p    store.CountFramesParams
		want int64
	}{
		{store.CountFramesParams{ConversationID: c.ID, RequestID: tr.RequestID}, 10}, // its instruction too
		{store.CountFramesParams{ConversationID: c.ID, RequestID: tr.RequestID, Type: protocol.FrameToolCall}, 2},
		{store.CountFramesParams{ConversationID: c.ID, RequestID: tr.RequestID, Type: protocol.FrameError}, 0},
		{store.CountFramesParams{ConversationID: other.ID, RequestID: otherTurn.RequestID, Type: protocol.FrameText}, 8},
		{store.CountFramesParams{ConversationID: other.ID, RequestID: tr.RequestID}, 0},
		{store.CountFramesParams{ConversationID: c.ID, RequestID: newID()}, 0},
	} {
		got, err := f.s.CountFrames(f.ctx, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("CountFrames(%+v) = %d, %v; want %d", tc.p, got, err, tc.want)
		}
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

	held := f.submitParams(c.ID, f.get(c.ID).LastSequence())
	held.Instance = "gone" // recovery ends the turns a stopped process held
	tr, _, err := f.s.SubmitTurn(f.ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	sig = f.s.FrameSignal(c.ID)
	if _, err := f.s.RecoverTurns(f.ctx, store.RecoverTurnsParams{Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig, "recovery")
	if g := f.turn(tr.RequestID); g.Status != store.TurnFailed {
		t.Fatalf("recovered turn is %s", g.Status)
	}
}

// testSubscribe: a subscription gets each committed frame, after its
// commit, as its SSE event (the same bytes a replay writes); a write that
// fails publishes nothing; the done frame of a finished turn comes too.
func testSubscribe(t *testing.T, f *fixture) {
	c, tr := f.running()
	other := f.conversation()
	sub := f.s.Subscribe(c.ID)
	defer sub.Close()
	otherSub := f.s.Subscribe(other.ID)
	defer otherSub.Close()

	want := f.append(c.ID, tr.RequestID, text("one"), text("two"))
	waitClosed(t, sub.Ready(), "append")
	if _, err := f.s.AppendFrames(f.ctx, appendParams(c.ID, newID(), f.tick(), text("not active"))); err == nil {
		t.Fatal("an append by a request that is not active succeeded")
	}
	want = append(want, f.finish(tr.RequestID, store.TurnFailed, protocol.Errorf(protocol.ModelFailure, "boom"))...)
	var got []feed.Event
	after := c.LastSequence()
	for len(got) < len(want) {
		evs, behind := sub.Next(after, nil, 100)
		if behind {
			t.Fatalf("a subscriber that kept up is behind at %d", after)
		}
		if len(evs) == 0 {
			waitClosed(t, sub.Ready(), "finish")
			continue
		}
		got = append(got, evs...)
		after = evs[len(evs)-1].Sequence
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i, e := range got {
		sse, err := protocol.AppendSSE(nil, want[i].Wire())
		if err != nil {
			t.Fatal(err)
		}
		if e.Sequence != want[i].Sequence || string(e.SSE) != string(sse) {
			t.Fatalf("event %d = %d %q, want %d %q", i, e.Sequence, e.SSE, want[i].Sequence, sse)
		}
	}
	wantDone(t, want[len(want)-1], protocol.OutcomeFailed)
	if evs, behind := otherSub.Next(0, nil, 10); len(evs) != 0 || behind {
		t.Fatalf("another conversation's subscriber got %d events", len(evs))
	}
}
