package httpapi

import (
	"bufio"
	"net/http"
	"strconv"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// replayPage is how many frames one store read fetches; replay of a long
// conversation is paged, never loaded whole.
const replayPage = 500

// handleStream serves GET .../stream?after_sequence=N as Server-Sent Events
// (ADR D6, DESIGN.md §6): committed frames after the cursor, in order, then
// live frames as they commit, with comment heartbeats, until the client
// leaves or the server closes.
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
	if err := s.coord.OpenStream(r.Context(), convID, after); err != nil {
		s.writeError(w, r, err)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 32<<10)
	s.metrics.streamsOpen.Add(1)
	defer s.metrics.streamsOpen.Add(-1)
	opened := time.Now() // frames committed from now on are live: their commit-to-flush is measured

	flush := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if err := bw.Flush(); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A retry hint and an opening comment let the client see the stream is live.
	bw.WriteString("retry: 2000\n: connected\n\n")
	if !flush() {
		return
	}
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	ctx := r.Context()
	for {
		signal := s.coord.FrameSignal(convID) // before reading: no commit is missed
		frames, err := s.coord.ReadFrames(ctx, convID, after, replayPage)
		if err != nil {
			if ctx.Err() == nil {
				s.writeStreamError(bw, err)
				flush()
			}
			return
		}
		for _, f := range frames {
			b, err := protocol.Marshal(f)
			if err != nil {
				s.log.Error("encode frame", "conversation", convID, "sequence", f.Sequence, "err", err)
				return
			}
			bw.WriteString("id: ")
			bw.WriteString(strconv.FormatInt(f.Sequence, 10))
			bw.WriteString("\ndata: ")
			bw.Write(b)
			bw.WriteString("\n\n")
			after = f.Sequence
			if bw.Buffered() > 16<<10 && !flush() {
				return
			}
		}
		if len(frames) > 0 {
			if !flush() {
				return
			}
			s.metrics.framesSent.Add(int64(len(frames)))
			s.metrics.flushed(frames, opened)
			if len(frames) == replayPage {
				continue // more to replay
			}
		}
		select {
		case <-signal:
		case <-heartbeat.C:
			bw.WriteString(": heartbeat\n\n")
			if !flush() {
				return
			}
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		}
	}
}

// writeStreamError reports a failure after the stream started as an SSE
// comment naming the code; the client reconnects from its cursor and gets
// the typed HTTP error (for example replay_gap) before any frame.
func (s *Server) writeStreamError(bw *bufio.Writer, err error) {
	pe := protocol.ErrorOf(err)
	if pe.Code == protocol.ServiceFailure {
		s.log.Error("stream read", "err", err)
	}
	bw.WriteString(": error " + string(pe.Code) + "\n\n")
}
