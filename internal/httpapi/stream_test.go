package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// readCounter counts the reads a stream makes of the store: frames and
// conversations.
type readCounter struct {
	store.Store
	n            atomic.Int64
	afterGetTurn atomic.Pointer[func()]
	failGetTurn  atomic.Int64 // the next calls of GetTurn that fail
}

func (r *readCounter) ListFrames(ctx context.Context, p store.ListFramesParams) ([]store.Frame, error) {
	r.n.Add(1)
	return r.Store.ListFrames(ctx, p)
}

func (r *readCounter) GetConversation(ctx context.Context, id string) (store.Conversation, error) {
	r.n.Add(1)
	return r.Store.GetConversation(ctx, id)
}

// GetTurn runs the hook set in afterGetTurn, once, after the read.
func (r *readCounter) GetTurn(ctx context.Context, requestID string) (store.Turn, error) {
	if r.failGetTurn.Add(-1) >= 0 {
		return store.Turn{}, errors.New("injected: the read failed")
	}
	r.failGetTurn.Store(0)
	t, err := r.Store.GetTurn(ctx, requestID)
	if hook := r.afterGetTurn.Swap(nil); hook != nil {
		(*hook)()
	}
	return t, err
}

// rawStream is a stream opened on a bare TCP connection: it reads only
// when told to, as a client that stopped reading would.
type rawStream struct {
	conn net.Conn
	r    *bufio.Reader
}

// openRaw opens a stream and reads up to its opening comment.
func (h *harness) openRaw(convID string, after int64) *rawStream {
	h.t.Helper()
	return h.openRawSize(convID, after, 4096)
}

// openRawSize is openRaw reading through a buffer of size bytes.
func (h *harness) openRawSize(convID string, after int64, size int) *rawStream {
	h.t.Helper()
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /api/operator/conversations/%s/stream?after_sequence=%d HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
		convID, after, testToken)
	rs := &rawStream{conn: conn, r: bufio.NewReaderSize(conn, size)}
	if err := rs.until(": connected"); err != nil {
		h.t.Fatalf("open stream: %v", err)
	}
	return rs
}

// until reads lines until one that starts with prefix.
func (rs *rawStream) until(prefix string) error {
	_ = rs.conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a safety net only
	for {
		line, err := rs.r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, prefix) {
			return nil
		}
	}
}

// untilID reads events until the one with sequence seq, checking order.
func (rs *rawStream) untilID(after, seq int64) error {
	_ = rs.conn.SetReadDeadline(time.Now().Add(5 * time.Minute)) // a safety net only (benchmarks read long)
	for after < seq {
		line, err := rs.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		id, ok := bytes.CutPrefix(line, []byte("id: "))
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(id)), 10, 64)
		if err != nil || n != after+1 {
			return fmt.Errorf("event %q after %d", id, after)
		}
		after = n
	}
	return nil
}

// activeTurn makes a conversation with a submitted turn straight in the
// store (no model runs it): frames are appended by the test.
func (h *harness) activeTurn() (convID, requestID string, last int64) {
	h.t.Helper()
	a := storetest.ActiveTurns(h.t, h.store, 1, time.Now())[0]
	// Running, as a turn that appends frames is: the streams' status says
	// working, and its text changes nothing they show.
	if _, err := h.store.StartTurn(h.t.Context(), store.StartTurnParams{RequestID: a.RequestID, Now: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
	return a.ConversationID, a.RequestID, 1
}

func (h *harness) appendText(convID, rid string, n, size int) []store.Frame {
	h.t.Helper()
	batch := make([]store.NewFrame, n)
	for i := range batch {
		batch[i] = store.NewFrame{Payload: protocol.TextPayload{Content: strings.Repeat("x", size), Format: "plain", Role: protocol.RoleAssistant}}
	}
	fs, err := h.store.AppendFrames(context.Background(), store.AppendFramesParams{ConversationID: convID, RequestID: rid, Frames: batch, Now: time.Now()})
	if err != nil {
		h.t.Fatal(err)
	}
	return fs
}

// TestStreamSlowSubscriber: a client that stops reading holds up neither
// the commits nor the conversation's other streams, and nothing grows for
// it: the feed's window stays within its bounds and the slow stream keeps
// no queue of its own (when it reads again it replays from the store).
func TestStreamSlowSubscriber(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	convID, rid, last := h.activeTurn()
	slow := h.openRaw(convID, last)
	fast := h.openRaw(convID, last)
	const batches, perBatch, size = 40, 50, 2 << 10 // 4 MB: more than the window holds
	done := make(chan error, 1)
	go func() { done <- fast.untilID(last, last+batches*perBatch) }()
	for range batches {
		h.appendText(convID, rid, perBatch, size)
		n, b := h.store.Feed().Held(convID)
		if n > feed.Window || b > feed.WindowBytes {
			t.Fatalf("the feed holds %d events, %d bytes for the conversation: over its bounds", n, b)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the reading stream: %v", err)
	}
	if n := h.store.Feed().Streams(convID); n != 2 {
		t.Fatalf("%d streams follow the conversation, want 2 (the slow one is waiting, not dropped)", n)
	}
	// The slow client reads again: everything, in order, through store
	// replay where the window no longer reaches.
	if err := slow.untilID(last, last+batches*perBatch); err != nil {
		t.Fatalf("the slow stream: %v", err)
	}
}

// TestStreamIdleAndLiveReadNoDatabase: open streams make no database call
// while idle (heartbeats included), and a live frame reaches all of them
// from memory: no stream reads the store for it.
func TestStreamIdleAndLiveReadNoDatabase(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{heartbeat: 20 * time.Millisecond})
	convID, rid, last := h.activeTurn()
	streams := make([]*rawStream, 20)
	for i := range streams {
		streams[i] = h.openRaw(convID, last)
	}
	// A heartbeat comes only from a stream that has replayed and waits:
	// from here on no read may happen.
	for _, rs := range streams {
		if err := rs.until(": heartbeat"); err != nil {
			t.Fatal(err)
		}
	}
	before := h.reads.n.Load()
	for _, rs := range streams[:3] {
		for range 3 {
			if err := rs.until(": heartbeat"); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.appendText(convID, rid, 2, 100)
	var wg sync.WaitGroup
	for _, rs := range streams {
		wg.Go(func() {
			if err := rs.untilID(last, last+2); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := h.reads.n.Load() - before; n != 0 {
		t.Fatalf("%d database reads by idle streams and a live frame to 20 streams, want 0", n)
	}
}

// TestStreamHeartbeatsOnlyWhenQuiet: a stream that wrote frames since its
// last heartbeat is not sent one (its frames show it alive); a quiet
// stream is, every interval.
func TestStreamHeartbeatsOnlyWhenQuiet(t *testing.T) {
	t.Parallel()
	const beats = 8
	h := newHarness(t, harnessOpts{heartbeat: 100 * time.Millisecond})
	convID, rid, last := h.activeTurn()
	busy := h.openRaw(convID, last)
	quiet := h.openRaw(h.conversation().ID, 0)
	quietDone := make(chan error, 1)
	go func() {
		for range beats {
			if err := quiet.until(": heartbeat"); err != nil {
				quietDone <- err
				return
			}
		}
		quietDone <- nil
	}()
	// A frame at a time, each read before the next: the busy stream
	// writes far more often than once a heartbeat interval.
	busyBeats := 0
	for seq := last + 1; ; seq++ {
		select {
		case err := <-quietDone:
			if err != nil {
				t.Fatalf("the quiet stream: %v", err)
			}
			// A stall of the machine longer than an interval may let one
			// through; a beat every interval is what this test rules out.
			if busyBeats > 2 {
				t.Fatalf("the busy stream was sent %d heartbeats while the quiet one got %d", busyBeats, beats)
			}
			return
		default:
		}
		h.appendText(convID, rid, 1, 10)
		_ = busy.conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a safety net only
		for {
			line, err := busy.r.ReadString('\n')
			if err != nil {
				t.Fatalf("the busy stream: %v", err)
			}
			if strings.HasPrefix(line, ": heartbeat") {
				busyBeats++
			}
			if line == fmt.Sprintf("id: %d\n", seq) {
				break
			}
		}
	}
}

// endElsewhere completes a turn as its owner, another daemon ("elsewhere"),
// would: its done frame is committed, and this daemon only sees it.
func (h *harness) endElsewhere(requestID string) error {
	_, _, err := h.store.FinishTurn(context.Background(), store.FinishTurnParams{RequestID: requestID, Status: store.TurnCompleted,
		Now: time.Now(), Instance: "elsewhere"})
	return err
}

// TestStreamStatusFollowsAnotherDaemonsTurn: a turn this daemon does not
// own (another daemon's on a shared database; here one written to the
// store directly) is known to the streams only by its frames. When one may
// have moved it (it started, it ended), every stream says so in its status
// comment, and the conversation's 20 streams share one read for it; the
// text of a working turn costs none.
func TestStreamStatusFollowsAnotherDaemonsTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	a := storetest.ActiveTurns(t, h.store, 1, time.Now())[0] // queued, owned by no daemon here
	status := func(state string) string {
		if state == "" {
			return `: status {"activeTurn":null}`
		}
		return `: status {"activeTurn":{"requestId":"` + a.RequestID + `","state":"` + state + `"`
	}
	streams := make([]*rawStream, 20)
	for i := range streams {
		streams[i] = h.openRaw(a.ConversationID, 1)
		if err := streams[i].until(status("queued")); err != nil {
			t.Fatal(err)
		}
	}
	// reads runs step and counts the store reads the streams made for it.
	reads := func(step func(), want string) int64 {
		t.Helper()
		before := h.reads.n.Load()
		step()
		for _, rs := range streams {
			if err := rs.until(want); err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
		}
		return h.reads.n.Load() - before
	}
	// Claimed elsewhere (a claim writes no frame): its first frame tells.
	if _, err := h.store.StartTurn(t.Context(), store.StartTurnParams{RequestID: a.RequestID, Now: time.Now(), Instance: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if n := reads(func() { h.appendText(a.ConversationID, a.RequestID, 1, 10) }, status("working")); n != 1 {
		t.Fatalf("the turn's start: %d reads by 20 streams, want 1", n)
	}
	if n := reads(func() { h.appendText(a.ConversationID, a.RequestID, 1, 10) }, "id: 3"); n != 0 {
		t.Fatalf("text of a working turn: %d reads, want 0", n)
	}
	end := func() {
		if err := h.endElsewhere(a.RequestID); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads(end, status("")); n != 1 {
		t.Fatalf("the turn's end: %d reads by 20 streams, want 1", n)
	}
}

// TestStreamStatusAfterAFailedRead: the progress read at a stream's start
// fails (a busy database); the stream does not stay without a status until
// the turn next moves: the next heartbeat's tick reads it again.
func TestStreamStatusAfterAFailedRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{heartbeat: 50 * time.Millisecond})
	a := storetest.ActiveTurns(t, h.store, 1, time.Now())[0] // queued, owned by no daemon here
	h.reads.failGetTurn.Store(1)
	rs := h.openRaw(a.ConversationID, 1)
	_ = rs.conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // a safety net only
	want := `: status {"activeTurn":{"requestId":"` + a.RequestID + `","state":"queued"`
	for {
		line, err := rs.r.ReadString('\n')
		if err != nil {
			t.Fatalf("no status after the failed read: %v", err)
		}
		if strings.HasPrefix(line, want) {
			return
		}
	}
}

// TestStreamStatusCatchesUpInReplay: a turn another daemon owns ends
// between the stream's first status (read at open: working) and its replay
// of the frames; the done frame comes from the store, not the feed, and
// the status still follows it.
func TestStreamStatusCatchesUpInReplay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	a := storetest.ActiveTurns(t, h.store, 1, time.Now())[0]
	if _, err := h.store.StartTurn(t.Context(), store.StartTurnParams{RequestID: a.RequestID, Now: time.Now(), Instance: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	end := func() {
		if err := h.endElsewhere(a.RequestID); err != nil {
			t.Error(err) // in the server's goroutine: no Fatal
		}
	}
	h.reads.afterGetTurn.Store(&end) // the open's status read, then the turn ends
	rs := h.openRaw(a.ConversationID, 0)
	if err := rs.until(`: status {"activeTurn":{"requestId":"` + a.RequestID + `","state":"working"`); err != nil {
		t.Fatal(err)
	}
	if err := rs.until(`: status {"activeTurn":null}`); err != nil {
		t.Fatal(err)
	}
}
