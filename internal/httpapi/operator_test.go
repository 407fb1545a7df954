package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTurnStreamsTextThenDone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	acc := h.submit(c.ID, "hello")
	if acc.AcceptedSequence != 1 || acc.ConversationID != c.ID {
		t.Fatalf("accepted = %+v", acc)
	}
	frames := h.waitDone(c.ID, acc.RequestID)
	first, ok := frames[0].Payload.(protocol.TextPayload)
	if !ok || first.Role != protocol.RoleUser || first.Content != "hello" || frames[0].Sequence != 1 {
		t.Fatalf("first frame = %+v", frames[0])
	}
	var text strings.Builder
	for i, f := range frames {
		if f.Sequence != int64(i+1) {
			t.Fatalf("frame %d has sequence %d", i, f.Sequence)
		}
		if p, ok := f.Payload.(protocol.TextPayload); ok && p.Role == protocol.RoleAssistant {
			text.WriteString(p.Content)
		}
	}
	if !strings.HasPrefix(text.String(), "Hello from the Studio operator.") {
		t.Fatalf("assistant text = %q", text.String())
	}
	done := frames[len(frames)-1].Payload.(protocol.DonePayload)
	if done.Outcome != protocol.OutcomeCompleted || done.LastSequence != frames[len(frames)-1].Sequence {
		t.Fatalf("done = %+v", done)
	}
	// The conversation accepts the next turn at once.
	acc2 := h.submit(c.ID, "again")
	if acc2.AcceptedSequence != done.LastSequence+1 {
		t.Fatalf("second accepted sequence = %d, want %d", acc2.AcceptedSequence, done.LastSequence+1)
	}
	h.waitDone(c.ID, acc2.RequestID)
}

func TestSubmitRefusals(t *testing.T) {
	t.Parallel()
	slow := script.Script{Turns: []script.Turn{{Steps: []script.Step{{SleepMs: ptr(int64(60_000))}}}}}
	h := newHarness(t, harnessOpts{script: &slow})
	c := h.conversation()
	long := strings.Repeat("é", protocol.MaxInstructionChars+1)
	for _, tc := range []struct {
		name string
		req  protocol.TurnRequest
	}{
		{"empty", turnRequest("", 0)},
		{"blank", turnRequest("  \n", 0)},
		{"too long", turnRequest(long, 0)},
		{"bad space", protocol.TurnRequest{Instruction: "x", Context: protocol.ContextSnapshot{Space: "fleet", Route: "/"}, ExpectedLastSequence: ptr(int64(0))}},
		{"no route", protocol.TurnRequest{Instruction: "x", Context: protocol.ContextSnapshot{Space: "mission"}, ExpectedLastSequence: ptr(int64(0))}},
		{"no expected sequence", protocol.TurnRequest{Instruction: "x", Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}}},
	} {
		_, err := h.client.SubmitTurn(h.ctx(), c.ID, tc.req)
		wantCode(t, err, protocol.Validation)
	}
	// Exactly at the cap is accepted.
	ok := turnRequest(strings.Repeat("é", protocol.MaxInstructionChars), 0)
	acc, err := h.client.SubmitTurn(h.ctx(), c.ID, ok)
	if err != nil {
		t.Fatalf("instruction at the cap: %v", err)
	}
	// A second submission while the first is active is a conflict naming it.
	pe := wantCode(t, func() error { _, err := h.client.SubmitTurn(h.ctx(), c.ID, turnRequest("x", 1)); return err }(), protocol.Conflict)
	if pe.Details["activeRequestId"] != acc.RequestID {
		t.Fatalf("details = %v", pe.Details)
	}
	// Wrong cursor on another conversation is stale_context with the actual one.
	c2 := h.conversation()
	pe = wantCode(t, func() error { _, err := h.client.SubmitTurn(h.ctx(), c2.ID, turnRequest("x", 3)); return err }(), protocol.StaleContext)
	if pe.Details["actualLastSequence"] != float64(0) {
		t.Fatalf("details = %v", pe.Details)
	}
	// Unknown conversation.
	_, err = h.client.SubmitTurn(h.ctx(), "6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1", turnRequest("x", 0))
	wantCode(t, err, protocol.NotFound)
	// No refused submission left a frame behind.
	if frames := h.allFrames(c2.ID); len(frames) != 0 {
		t.Fatalf("refused submission wrote %d frames", len(frames))
	}
	if _, err := h.client.Cancel(h.ctx(), c.ID, acc.RequestID); err != nil {
		t.Fatal(err)
	}
	h.waitDone(c.ID, acc.RequestID)
}

func TestRawBodiesAreStrict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", h.srv.URL+"/api/operator/conversations/"+c.ID+"/turns", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, body := range []string{
		`{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0,"extra":1}`,
		`{"instruction":"x","instruction":"y","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`,
		`{"instruction":1,"context":{"space":"mission","route":"/"},"expectedLastSequence":0}`,
		`{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0,"expected_last_sequence":0}`,
		`{"instruction":"x","context":{"space":"mission","route":"/"},"ExpectedLastSequence":0}`,
		`{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0} {}`,
		`not json`,
	} {
		if code, b := post(body); code != 400 || !strings.Contains(b, `"code":"validation"`) {
			t.Errorf("body %s: %d %s", body, code, b)
		}
	}
	if code, b := post(`{"version":2,"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`); code != 400 || !strings.Contains(b, `"protocol_version"`) {
		t.Errorf("version 2: %d %s", code, b)
	}
	// The contract's snake_case spelling is accepted (docs/design.md §4).
	code, b := post(`{"instruction":"x","context":{"space":"mission","route":"/"},"expected_last_sequence":0}`)
	if code != 202 {
		t.Fatalf("snake_case body: %d %s", code, b)
	}
	var acc protocol.TurnAccepted
	if err := protocol.Unmarshal([]byte(b), &acc); err != nil {
		t.Fatal(err)
	}
	h.waitDone(c.ID, acc.RequestID)
}

func TestConcurrentSubmitsOneWins(t *testing.T) {
	t.Parallel()
	slow := script.Script{Turns: []script.Turn{{Steps: []script.Step{{SleepMs: ptr(int64(200))}, {Text: ptr("ok")}}}}}
	h := newHarness(t, harnessOpts{script: &slow})
	for round := 0; round < 5; round++ {
		c := h.conversation()
		var wg sync.WaitGroup
		results := make([]error, 2)
		accepted := make([]protocol.TurnAccepted, 2)
		for i := range 2 {
			wg.Go(func() {
				accepted[i], results[i] = h.client.SubmitTurn(h.ctx(), c.ID, turnRequest("go", 0))
			})
		}
		wg.Wait()
		var wins, conflicts int
		var winner string
		for i, err := range results {
			switch {
			case err == nil:
				wins++
				winner = accepted[i].RequestID
			case protocol.IsCode(err, protocol.Conflict):
				conflicts++
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("wins=%d conflicts=%d", wins, conflicts)
		}
		h.waitDone(c.ID, winner)
	}
}

func TestReplayFromEveryCursorThenLive(t *testing.T) {
	t.Parallel()
	steps := []script.Step{}
	for i := range 20 {
		steps = append(steps, script.Step{Text: ptr(string(rune('a' + i)))}, script.Step{SleepMs: ptr(int64(2))})
	}
	s := script.Script{Turns: []script.Turn{{Steps: steps}}}
	h := newHarness(t, harnessOpts{script: &s})
	c := h.conversation()
	for range 3 {
		acc := h.submit(c.ID, "spell")
		h.waitDone(c.ID, acc.RequestID)
	}
	all := h.allFrames(c.ID)
	n := int64(len(all))
	if all[n-1].Sequence != n {
		t.Fatalf("last sequence %d for %d frames", all[n-1].Sequence, n)
	}
	for after := int64(0); after <= n; after++ {
		var got []protocol.Frame
		if after < n {
			got = h.until(c.ID, after, func(f protocol.Frame) bool { return f.Sequence == n })
		}
		want := all[after:]
		if len(got) != len(want) {
			t.Fatalf("after %d: got %d frames, want %d", after, len(got), len(want))
		}
		for i := range want {
			a, _ := protocol.EncodeFrame(got[i])
			b, _ := protocol.EncodeFrame(want[i])
			if string(a) != string(b) {
				t.Fatalf("after %d frame %d: %s != %s", after, i, a, b)
			}
		}
	}
	// A stream opened at the tail waits, then delivers the live turn's frames
	// without loss or duplicate.
	seen := map[int64]int{}
	var mu sync.Mutex
	streaming := make(chan struct{})
	var wg sync.WaitGroup
	var last protocol.Frame
	wg.Go(func() {
		close(streaming)
		last = h.until(c.ID, n, func(f protocol.Frame) bool {
			mu.Lock()
			seen[f.Sequence]++
			mu.Unlock()
			return f.Type == protocol.FrameDone
		})[0]
	})
	<-streaming
	acc := h.submit(c.ID, "spell")
	wg.Wait()
	if last.Sequence != n+1 || acc.AcceptedSequence != n+1 {
		t.Fatalf("live stream started at %d, accepted %d", last.Sequence, acc.AcceptedSequence)
	}
	final := h.allFrames(c.ID)
	for _, f := range final[n:] {
		if seen[f.Sequence] != 1 {
			t.Fatalf("live frame %d seen %d times", f.Sequence, seen[f.Sequence])
		}
	}
	if len(seen) != len(final)-int(n) {
		t.Fatalf("live saw %d frames, want %d", len(seen), len(final)-int(n))
	}
}

func TestLastEventIDAndHeartbeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{heartbeat: 10 * time.Millisecond})
	c := h.conversation()
	acc := h.submit(c.ID, "hi")
	frames := h.waitDone(c.ID, acc.RequestID)
	req, _ := http.NewRequestWithContext(h.ctx(), "GET", h.srv.URL+"/api/operator/conversations/"+c.ID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Last-Event-ID", "2")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var ids []string
	heartbeats := 0
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 1024)
	for heartbeats < 2 {
		k, err := resp.Body.Read(chunk)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(buf, chunk[:k]...)
		heartbeats = strings.Count(string(buf), ": heartbeat")
	}
	err = apiclient.ReadEvents(strings.NewReader(string(buf)), func(ev apiclient.Event) error {
		ids = append(ids, ev.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(frames)-2 || ids[0] != "3" {
		t.Fatalf("ids after Last-Event-ID 2: %v (of %d frames)", ids, len(frames))
	}
}

func TestConversationLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := h.ctx()
	title := "Nightly"
	c, err := h.client.CreateConversation(ctx, protocol.CreateConversationRequest{Title: &title, Project: ptr("repo-x")})
	if err != nil || c.Status != "active" || *c.Title != "Nightly" || *c.Project != "repo-x" {
		t.Fatalf("create: %+v %v", c, err)
	}
	acc := h.submit(c.ID, "hi")
	h.waitDone(c.ID, acc.RequestID)
	renamed, err := h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Title: ptr("Morning")})
	if err != nil || *renamed.Title != "Morning" {
		t.Fatalf("rename: %+v %v", renamed, err)
	}
	archived, err := h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Status: ptr("archived")})
	if err != nil || archived.Status != "archived" || archived.ArchivedAt == nil {
		t.Fatalf("archive: %+v %v", archived, err)
	}
	// Archived: read-only (no turn, no new title), still replayable.
	_, err = h.client.SubmitTurn(ctx, c.ID, turnRequest("x", archived.LastSequence))
	wantCode(t, err, protocol.Conflict)
	_, err = h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Title: ptr("Evening")})
	wantCode(t, err, protocol.Conflict)
	if frames := h.allFrames(c.ID); int64(len(frames)) != archived.LastSequence {
		t.Fatalf("archived replay: %d frames, want %d", len(frames), archived.LastSequence)
	}
	list, err := h.client.ListConversations(ctx, "archived", "", 0)
	if err != nil || len(list.Conversations) != 1 || list.Conversations[0].ID != c.ID {
		t.Fatalf("archived list: %+v %v", list, err)
	}
	if _, err := h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Status: ptr("active")}); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Status: ptr("deleted")})
	wantCode(t, err, protocol.Validation)
	if _, err := h.client.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	// Deleted: not_found everywhere.
	_, err = h.client.GetConversation(ctx, c.ID, 0, 0)
	wantCode(t, err, protocol.NotFound)
	wantCode(t, h.client.Stream(ctx, c.ID, 0, func(protocol.Frame) error { return nil }), protocol.NotFound)
	_, err = h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Title: ptr("x")})
	wantCode(t, err, protocol.NotFound)
	_, err = h.client.DeleteConversation(ctx, c.ID)
	wantCode(t, err, protocol.NotFound)
	_, err = h.client.Cancel(ctx, c.ID, acc.RequestID)
	wantCode(t, err, protocol.NotFound)
	_, err = h.client.CreateTicket(ctx, protocol.StreamTicketRequest{ConversationID: c.ID})
	wantCode(t, err, protocol.NotFound)
	list, err = h.client.ListConversations(ctx, "", "", 0)
	if err != nil || len(list.Conversations) != 0 {
		t.Fatalf("list after delete: %+v %v", list, err)
	}
}

func TestConversationPagingNeitherSkipsNorRepeats(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	want := map[string]bool{}
	for i := range 23 {
		c := h.conversation()
		want[c.ID] = true
		if i%5 == 0 {
			h.clock.Advance(time.Second) // some share created_at, some do not
		}
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := h.client.ListConversations(h.ctx(), "", cursor, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Conversations {
			if seen[c.ID] {
				t.Fatalf("conversation %s repeated", c.ID)
			}
			seen[c.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("saw %d conversations, want %d", len(seen), len(want))
	}
	_, err := h.client.ListConversations(h.ctx(), "", "garbage!", 4)
	wantCode(t, err, protocol.Validation)
}

// Admission control: with the queue bound at N and the one worker busy,
// N+5 submissions across conversations leave 5 refused 429 rate_limited
// with retryAfterMs and Retry-After, nothing of them created; the cockpit's
// own API answers meanwhile (it does not go through the turn queue).
func TestSubmitPastTheQueueBoundIs429(t *testing.T) {
	t.Parallel()
	const bound = 3
	s := script.Script{Turns: []script.Turn{{Match: "block", Steps: []script.Step{{SleepMs: ptr(int64(600_000))}}},
		{Steps: []script.Step{{Text: ptr("ok")}}}}}
	h := newHarness(t, harnessOpts{script: &s, workers: 1, maxQueued: bound, serveApp: true})
	busy := h.conversation()
	blocker := h.submit(busy.ID, "block")
	h.waitTurnStatus(blocker.RequestID, "running")

	var accepted []protocol.TurnAccepted
	refused := 0
	for range bound + 5 {
		c := h.conversation()
		acc, err := h.client.SubmitTurn(h.ctx(), c.ID, turnRequest("hello", 0))
		if err != nil {
			pe := wantCode(t, err, protocol.RateLimited)
			if !pe.Retryable || pe.RetryAfterMs <= 0 {
				t.Fatalf("refusal %+v", pe)
			}
			if frames := h.allFrames(c.ID); len(frames) != 0 {
				t.Fatalf("a refused submission left %d frames", len(frames))
			}
			refused++
			continue
		}
		accepted = append(accepted, acc)
	}
	if refused != 5 || len(accepted) != bound {
		t.Fatalf("%d refused, %d accepted", refused, len(accepted))
	}
	// The header, on the wire.
	c := h.conversation()
	req, _ := http.NewRequest("POST", h.srv.URL+"/api/operator/conversations/"+c.ID+"/turns",
		strings.NewReader(`{"instruction":"x","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The cockpit's API is not behind the queue.
	var page studio.PlaybookPage
	if err := h.client.Do(h.ctx(), http.MethodGet, "/api/app/playbooks", nil, &page); err != nil || len(page.Playbooks) == 0 {
		t.Fatalf("cockpit while the queue is full: %+v %v", page, err)
	}
	if rep, err := h.client.Doctor(h.ctx()); err != nil || rep.Status == "" {
		t.Fatalf("doctor while the queue is full: %+v %v", rep, err)
	}
	if _, err := h.client.Cancel(h.ctx(), busy.ID, blocker.RequestID); err != nil {
		t.Fatal(err)
	}
	for _, acc := range accepted {
		h.waitDone(acc.ConversationID, acc.RequestID)
	}
}
