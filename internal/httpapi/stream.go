package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// replayPage is how many frames one store read fetches; replay of a long
// conversation is paged, never loaded whole.
const replayPage = 500

// liveBatch is how many events of the conversation's window one write
// takes.
const liveBatch = 256

// flushAt is how many bytes of replay a stream encodes before it writes.
const flushAt = 16 << 10

// handleStream serves GET .../stream?after_sequence=N as Server-Sent Events
// (ADR D6, DESIGN.md §6): committed frames after the cursor, in order, then
// live frames as they commit, with comment heartbeats, until the client
// leaves or the server closes.
//
// Replay reads the store, a page at a time. Live frames come from memory
// (store.Feed): each is encoded once for all the conversation's streams,
// and a stream that falls behind the feed's window reads the store again
// from its cursor. An idle stream costs no database work: it waits for
// the feed's wake-up or its heartbeat, and holds no buffer between writes.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	convID := r.PathValue("id")
	q := r.URL.Query()
	cursor := q.Get("after_sequence")
	if cursor == "" {
		cursor = r.Header.Get("Last-Event-ID")
	}
	after, err := queryInt(cursor, 0, 0, 1<<62, "after_sequence")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Validate before dispatch: credentials, conversation and cursor are all
	// checked before the first byte of the stream.
	if ticket := q.Get("ticket"); ticket != "" {
		if r.Header.Get("Authorization") != "" {
			s.writeError(w, r, protocol.Errorf(protocol.AuthRequired, "send either a ticket or a bearer token, not both"))
			return
		}
		if err := s.coord.RedeemStreamTicket(r.Context(), ticket, convID, after); err != nil {
			s.writeError(w, r, err)
			return
		}
	} else if err := s.checkBearer(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.coord.OpenStream(r.Context(), convID, after); err != nil {
		s.writeError(w, r, err)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.metrics.streamsOpen.Add(1)
	defer s.metrics.streamsOpen.Add(-1)
	// Subscribe before the first read of the store: whatever commits after
	// the read is in the feed.
	sub := s.coord.Subscribe(convID)
	defer sub.Close()
	st := stream{s: s, w: w, rc: http.NewResponseController(w), convID: convID, after: after}
	st.run(r, sub)
}

// stream is one SSE response.
type stream struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	convID string
	after  int64 // the cursor: the last sequence written
}

func (st *stream) run(r *http.Request, sub *store.Subscription) {
	s, ctx := st.s, r.Context()
	// A retry hint and an opening comment let the client see the stream is live.
	if !st.write([]byte("retry: 2000\n: connected\n\n")) || !st.flush() {
		return
	}
	beats := s.heartbeats()
	slot := beats.slot()
	replay := true // from the store: first, and whenever behind the feed
	for {
		if replay {
			n, ok := st.replay(r)
			if !ok {
				return
			}
			if n == replayPage {
				continue // more to replay
			}
			replay = false
		}
		n, behind, ok := st.live(sub)
		if !ok {
			return
		}
		if behind {
			replay = true
			continue
		}
		if n > 0 {
			continue
		}
		select {
		case <-sub.Ready():
		case <-beats.wait(slot):
			if !st.write([]byte(": heartbeat\n\n")) || !st.flush() {
				return
			}
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		}
	}
}

// replay writes one page of frames from the store; n is how many.
func (st *stream) replay(r *http.Request) (n int, ok bool) {
	s, ctx := st.s, r.Context()
	frames, err := s.coord.ReadFrames(ctx, st.convID, st.after, replayPage)
	if err != nil {
		if ctx.Err() == nil {
			st.writeError(err)
			st.flush()
		}
		return 0, false
	}
	if len(frames) == 0 {
		return 0, true
	}
	bp := sseBuffers.Get().(*[]byte)
	defer func() { sseBuffers.Put(bp) }()
	buf := (*bp)[:0]
	for _, f := range frames {
		if buf, err = protocol.AppendSSE(buf, f.Wire()); err != nil {
			s.log.Error("encode frame", "conversation", st.convID, "sequence", f.Sequence, "err", err)
			return 0, false
		}
		st.after = f.Sequence
		if len(buf) >= flushAt {
			if !st.write(buf) {
				return 0, false
			}
			buf = buf[:0]
		}
	}
	*bp = buf[:0]
	if !st.write(buf) || !st.flush() {
		return 0, false
	}
	s.metrics.framesSent.Add(int64(len(frames)))
	return len(frames), true
}

// live writes what the feed holds after the cursor; behind: the feed no
// longer reaches back to it.
func (st *stream) live(sub *store.Subscription) (n int, behind, ok bool) {
	ep := eventBuffers.Get().(*[]store.Event)
	defer func() {
		clear(*ep) // hold no event past the write
		eventBuffers.Put(ep)
	}()
	events, behind := sub.Next(st.after, (*ep)[:0], liveBatch)
	*ep = events
	if behind || len(events) == 0 {
		return 0, behind, true
	}
	for _, e := range events {
		if !st.write(e.SSE) {
			return 0, false, false
		}
		st.after = e.Sequence
	}
	if !st.flush() {
		return 0, false, false
	}
	st.s.metrics.framesSent.Add(int64(len(events)))
	return len(events), false, true
}

// write writes b, bounded by the write timeout: a client that does not
// read is cut off, never buffered for.
func (st *stream) write(b []byte) bool {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.cfg.WriteTimeout))
	_, err := st.w.Write(b)
	return err == nil
}

func (st *stream) flush() bool {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.cfg.WriteTimeout))
	return st.rc.Flush() == nil
}

// writeError reports a failure after the stream started as an SSE comment
// naming the code; the client reconnects from its cursor and gets the
// typed HTTP error (for example replay_gap) before any frame.
func (st *stream) writeError(err error) {
	pe := protocol.ErrorOf(err)
	if pe.Code == protocol.ServiceFailure {
		st.s.log.Error("stream read", "err", err)
	}
	st.write([]byte(": error " + string(pe.Code) + "\n\n"))
}

// Buffers a stream holds only while it writes.
var (
	sseBuffers   = sync.Pool{New: func() any { b := make([]byte, 0, flushAt+4<<10); return &b }}
	eventBuffers = sync.Pool{New: func() any { e := make([]store.Event, 0, liveBatch); return &e }}
)

// heartbeats is the server's heartbeat wheel, started by the first stream.
func (s *Server) heartbeats() *heartbeats {
	s.beatsOnce.Do(func() { s.beats = newHeartbeats(s.cfg.Heartbeat) })
	if s.beats == nil { // closed before any stream
		return closedHeartbeats
	}
	return s.beats
}

// closedHeartbeats serves a stream that starts after Close: it ends at
// once on s.closing, and this wheel never turns.
var closedHeartbeats = &heartbeats{}
