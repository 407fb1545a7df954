package httpapi

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/frametrace"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/sse"
)

// replayPage is how many frames one store read fetches; replay of a long
// conversation is paged, never loaded whole.
const replayPage = 500

// liveBatch is how many events of the conversation's window one write
// takes.
const liveBatch = 256

// flushAt is how many bytes of live frames a stream encodes before it
// writes.
const flushAt = 16 << 10

// replayFlushAt is flushAt for replay, where a page's frames are all at
// hand: fewer, larger writes (a page of small frames is 150 KiB).
const replayFlushAt = 64 << 10

// handleStream serves GET .../stream?after_sequence=N as Server-Sent Events
// (docs/design.md §11): committed frames after the cursor, in order, then
// live frames as they commit, with comment heartbeats, until the client
// leaves or the server closes.
//
// Replay reads the store, a page at a time. Live frames come from memory
// (feed.Feed): each is encoded once for all the conversation's streams,
// and a stream that falls behind the feed's window reads the store again
// from its cursor. An idle stream costs no database work: it waits for
// the feed's wake-up or its heartbeat, and holds no buffer between writes.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	st, r, err := s.openStream(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	sse.SetHeaders(h)
	// HTTP/1.1: take the connection over and serve the stream from one
	// goroutine of its own, letting the server's go (with its request
	// buffers and its background reader). Where the server does not allow
	// it (HTTP/2), the stream runs in the handler.
	if conn, ok := s.hijack(w); ok {
		s.serveTakenOver(st, conn, h)
		return
	}
	w.WriteHeader(http.StatusOK)
	st.out = responseSink{w, http.NewResponseController(w), s.cfg.WriteTimeout}
	st.ctx = r.Context()
	st.run()
}

// openStream checks a stream's request before the first byte of the
// stream: credentials first (a request without any is a 401, whatever its
// cursor), then the cursor, the decision and the conversation. It returns
// the request with its decision's context.
func (s *Server) openStream(r *http.Request) (*stream, *http.Request, error) {
	convID := r.PathValue("id")
	ticket := r.URL.Query().Get("ticket")
	who, cred, err := s.streamCredentials(r, ticket)
	if err != nil {
		return nil, r, err
	}
	after, err := streamCursor(r, ticket)
	if err != nil {
		return nil, r, err
	}
	// A stream is decided like any read of its conversation; one opened
	// with a ticket is decided again at redemption, for the ticket's
	// minter as it is now (its token, its role, the conversation's
	// visibility), and every open stream again whenever a right may have
	// been taken away (run).
	action := policy.ReadConversation
	if ticket != "" {
		minter, err := s.cfg.Streams.RedeemStreamTicket(r.Context(), ticket, convID, after)
		if err == nil {
			who, err = s.reauthenticate(r.Context(), minter)
		}
		if err != nil {
			return nil, r, err
		}
		cred, action = minter, policy.RedeemTicket
	}
	r = r.WithContext(s.withPolicy(r.Context(), who))
	if err := s.askConversation(r.Context(), action, convID); err != nil {
		return nil, r, err
	}
	opened, err := s.cfg.Streams.OpenStream(r.Context(), convID, after)
	if err != nil {
		return nil, r, err
	}
	return &stream{s: s, convID: convID, after: after, opened: opened, requestID: requestIDOf(r.Context()), started: time.Now(),
		cred: cred, action: action, door: policy.ContextFrom(r.Context())}, r, nil
}

// streamCredentials authenticates a stream's request by its bearer token
// (or the sign-in proxy's header), or leaves it to its ticket: never both,
// and never credentials in the URL.
func (s *Server) streamCredentials(r *http.Request, ticket string) (who protocol.Principal, cred credential, err error) {
	q := r.URL.Query()
	switch {
	case q.Has("token") || q.Has("access_token"):
		return who, cred, protocol.Errorf(protocol.AuthRequired, "credentials are never accepted in a URL; send Authorization: Bearer, or a stream ticket alone")
	case q.Has("ticket") && r.Header.Get("Authorization") != "":
		return who, cred, protocol.Errorf(protocol.AuthRequired, "send either a ticket or a bearer token, not both")
	case ticket != "" && s.cfg.AuthProxy != nil && s.cfg.AuthProxy.carried(r):
		// The sign-in proxy's header is refused from anyone but the proxy,
		// beside a ticket too.
		_, _, err = s.authenticate(r)
		return who, cred, err
	case ticket == "":
		return s.authenticate(r)
	}
	return who, cred, nil
}

// streamCursor is the stream's after_sequence, or its Last-Event-ID when a
// browser reconnects.
func streamCursor(r *http.Request, ticket string) (int64, error) {
	cursor := r.URL.Query().Get("after_sequence")
	if cursor == "" {
		cursor = r.Header.Get("Last-Event-ID")
	}
	after, err := queryInt(cursor, 0, 0, maxCursor, "after_sequence")
	if err != nil && ticket != "" {
		// No ticket is issued for a cursor the stream refuses.
		err = protocol.Errorf(protocol.AuthRequired, "stream ticket was issued for another conversation or cursor")
	}
	return after, err
}

// serveTakenOver serves st on conn, taken over from net/http, from a
// goroutine of its own: the response head, then the stream, with no
// chunking (the stream's end is the connection's).
func (s *Server) serveTakenOver(st *stream, conn net.Conn, h http.Header) {
	st.out = connSink{conn}
	st.ctx, st.cancel = context.WithCancel(s.base)
	h.Set("Connection", "close")
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	st.write(head.Bytes())
	// net/http no longer watches a connection taken over: the stream
	// notices the client closing it at once (not when a heartbeat write
	// fails, seconds later) and ends, which closes the connection and
	// frees the client's connection slot.
	end := s.watchStreamConn(conn, st.cancel)
	go func() {
		defer s.streams.Done()
		defer end()
		defer st.cancel()
		st.run()
	}()
}

// hijack takes over w's connection for a stream, counted in s.streams;
// false: the server does not allow it, or it is closing.
func (s *Server) hijack(w http.ResponseWriter) (net.Conn, bool) {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	if s.closed {
		return nil, false
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	// brw holds the server's buffers; nothing more is read from a stream's
	// request, and its writes go straight to conn.
	_ = brw
	_ = conn.SetDeadline(time.Time{})
	s.streams.Add(1)
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	s.conns[conn] = struct{}{}
	return conn, true
}

// dropConn closes a stream's connection and forgets it.
func (s *Server) dropConn(conn net.Conn) {
	s.streamMu.Lock()
	delete(s.conns, conn)
	s.streamMu.Unlock()
	conn.Close()
}

// stream is one SSE response.
type stream struct {
	s      *Server
	out    sink
	ctx    context.Context
	cancel context.CancelFunc
	convID string
	after  int64   // the cursor: the last sequence written
	buf    *[]byte // pooled, held from the first write to the flush
	// deadline is the write deadline set on the connection.
	deadline time.Time
	status   statusState
	lease    leaseState
	// opened is the conversation's last sequence when the stream was
	// checked, before its first status: a frame after it that the stream
	// replays may have moved the turn since (statusState.movedBy).
	opened int64
	// For the line logged at its end: the request that opened it, when,
	// the frames written and, when a store read ended it, that reason.
	requestID string
	started   time.Time
	frames    int
	failed    bool
	// wrote: bytes went out since the last heartbeat (see run).
	wrote bool
	// ahead is the replay page after the one being written, read
	// meanwhile (readAhead); stopAhead ends that read.
	ahead     chan replayRead
	aheadCtx  context.Context
	stopAhead context.CancelFunc
	// What the stream was opened with and for: decided again whenever a
	// right may have been taken away (stillAllowed).
	cred   credential
	action policy.Action
	door   policy.Context
}

// replayRead is one page of replay as the store returned it.
type replayRead struct {
	frames []protocol.RawFrame
	err    error
}

// Why a stream ended (the reason of its "stream closed" line and of its
// lifetime sample).
const (
	streamClientGone    = "client_gone"    // the client left, or stopped reading (a write failed or timed out)
	streamServerClosing = "server_closing" // the daemon shuts down
	streamStoreError    = "store_error"    // a store read failed; the client reconnects from its cursor
)

// closed logs the stream's end and records its lifetime.
func (st *stream) closed() {
	reason := streamClientGone
	select {
	case <-st.s.closing:
		reason = streamServerClosing
	default:
		if st.failed {
			reason = streamStoreError
		}
	}
	d := time.Since(st.started)
	st.s.metrics.reg.StreamClosed(reason, d)
	st.s.log.Info("stream closed", "conversation", st.convID, "request_id", st.requestID, "duration", d,
		"frames", st.frames, "after_sequence", st.after, "reason", reason)
}

// sink is where a stream's bytes go: the response, or the connection
// taken over.
type sink interface {
	Write(b []byte) (int, error)
	flush() error
	setWriteDeadline(t time.Time)
}

type responseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (r responseSink) Write(b []byte) (int, error) { return r.w.Write(b) }
func (r responseSink) flush() error {
	_ = r.rc.SetWriteDeadline(time.Now().Add(r.timeout))
	return r.rc.Flush()
}
func (r responseSink) setWriteDeadline(t time.Time) { _ = r.rc.SetWriteDeadline(t) }

type connSink struct{ net.Conn }

func (connSink) flush() error                   { return nil }
func (c connSink) setWriteDeadline(t time.Time) { _ = c.SetWriteDeadline(t) }

func (st *stream) run() {
	s := st.s
	s.metrics.streamsOpen.Add(1)
	defer s.metrics.streamsOpen.Add(-1)
	defer st.closed()
	// Subscribe before the first read of the store: whatever commits after
	// the read is in the feed.
	sub := s.cfg.Streams.Subscribe(st.convID)
	defer sub.Close()
	defer st.release()
	defer st.endAhead()
	// A retry hint and an opening comment let the client see the stream is
	// live; then the active turn's progress (stream_status.go).
	st.write([]byte("retry: 2000\n: connected\n\n"))
	progressed := s.cfg.Turns.ProgressSignal(st.convID) // before reading: no change is missed
	access := s.cfg.Streams.AccessSignal()              // before the decision below: no revocation is missed
	leaseChanged := s.leaseChanged()
	st.status.write(st)
	st.lease.write(st)
	if !st.flush() {
		return
	}
	beats := s.heartbeats()
	slot := beats.slot()
	replay := true // from the store: first, and whenever behind the feed
	for {
		if replay {
			n, ok := st.replay()
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
		if n == liveBatch {
			continue // the window may hold more
		}
		// The window is written out: a commit since Next has left a
		// wake-up in Ready, so the stream waits without asking again.
		select {
		case <-sub.Ready():
		case <-progressed:
			progressed = s.cfg.Turns.ProgressSignal(st.convID)
			if st.status.write(st) && !st.flush() {
				return
			}
		case <-leaseChanged:
			leaseChanged = s.leaseChanged()
			if st.lease.write(st) && !st.flush() {
				return
			}
		case <-beats.wait(slot):
			if st.status.stale && st.status.write(st) && !st.flush() {
				return
			}
			// A stream that wrote since its last beat is alive as far as
			// the client and any proxy can tell: only a quiet one is sent
			// a comment (a busy daemon's 10 000 streams would otherwise
			// write 10 000 heartbeats a second beside their frames). A
			// client that left is noticed here, when the write fails.
			if !st.wrote {
				st.write([]byte(": heartbeat\n\n"))
				if !st.flush() {
					return
				}
			}
			st.wrote = false
		case <-access:
			access = s.cfg.Streams.AccessSignal()
			if err := st.stillAllowed(); err != nil {
				st.writeError(err)
				st.flush()
				return
			}
		case <-st.ctx.Done():
			return
		case <-s.closing:
			return
		}
	}
}

// stillAllowed decides the stream again, for its credential as it is now
// and its conversation as it is now (Server.stillAllowed). Not inlined:
// inlined, its arguments by value widen run's frame, which every idle
// stream's goroutine holds, and push the stacks of thousands of them past
// their first size (docs/benchmarks.md, idle streams).
//
//go:noinline
func (st *stream) stillAllowed() error {
	return st.s.stillAllowed(st.ctx, st.cred, st.door, st.convID, st.action)
}

// stillAllowed decides a long request (a stream) again, for the credential
// it was opened with as it is now and its conversation as it is now:
// access_revoked when the token was revoked, the principal disabled or
// given a role, or the conversation a visibility, that no longer lets it
// read or do action. A failure to decide ends it too (the client
// reconnects and is decided afresh).
func (s *Server) stillAllowed(ctx context.Context, cred credential, door policy.Context, convID string, action policy.Action) error {
	revoked := func(why string) error {
		return protocol.Errorf(protocol.AccessRevoked, "%s", why)
	}
	who, err := s.reauthenticate(ctx, cred)
	if protocol.IsCode(err, protocol.AuthRequired) {
		return revoked("the stream's credential was revoked")
	}
	if err != nil {
		return err
	}
	res, err := s.cfg.Conversations.PolicyResource(ctx, convID)
	if err != nil {
		return err
	}
	pctx := s.withPolicy(policy.WithDoor(ctx, door.Door), who)
	if policy.Ask(pctx, policy.ReadConversation, res) != nil || policy.Ask(pctx, action, res) != nil {
		return revoked("the stream's principal may no longer read this conversation")
	}
	return nil
}

// replay writes one page of frames from the store; n is how many.
func (st *stream) replay() (n int, ok bool) {
	s, ctx := st.s, st.ctx
	var frames []protocol.RawFrame
	var err error
	if st.ahead != nil {
		r := <-st.ahead
		st.ahead = nil
		frames, err = r.frames, r.err
	} else {
		s.metrics.streamReads.Add(1)
		frames, err = s.cfg.Streams.ReadFrames(ctx, st.convID, st.after, replayPage)
	}
	if err != nil {
		if ctx.Err() == nil {
			st.failed = true
			st.writeError(err)
			st.flush()
		}
		return 0, false
	}
	if len(frames) == replayPage {
		st.readAhead(frames[len(frames)-1].Sequence)
	}
	if len(frames) == 0 {
		return 0, true
	}
	moved := false
	for _, f := range frames {
		b := st.buffer()
		if *b, err = protocol.AppendSSE(*b, f); err != nil {
			s.log.Error("encode frame", "conversation", st.convID, "sequence", f.Sequence, "err", err)
			return 0, false
		}
		st.after = f.Sequence
		moved = moved || (f.Sequence > st.opened && st.status.movedBy(f.Type))
		if len(*b) >= replayFlushAt && !st.push() {
			return 0, false
		}
	}
	if moved {
		st.status.writeMoved(st)
	}
	if !st.flush() {
		return 0, false
	}
	s.metrics.framesSent.Add(int64(len(frames)))
	st.frames += len(frames)
	return len(frames), true
}

// readAhead starts reading the page after sequence after, for the next
// call of replay: a full page says more may follow, and the store's read
// of it then runs beside the encoding and the socket writes of this one
// (on another core) rather than after them. One page at most is ahead.
func (st *stream) readAhead(after int64) {
	if st.stopAhead == nil {
		var ctx context.Context
		ctx, st.stopAhead = context.WithCancel(st.ctx)
		st.aheadCtx = ctx
	}
	ch := make(chan replayRead, 1)
	st.ahead = ch
	st.s.metrics.streamReads.Add(1)
	ctx, s, convID := st.aheadCtx, st.s, st.convID
	go func() {
		frames, err := s.cfg.Streams.ReadFrames(ctx, convID, after, replayPage)
		ch <- replayRead{frames, err}
	}()
}

// endAhead ends a read ahead that replay will not take, and waits for it:
// a stream leaves no goroutine behind.
func (st *stream) endAhead() {
	if st.stopAhead == nil {
		return
	}
	st.stopAhead()
	if st.ahead != nil {
		<-st.ahead
		st.ahead = nil
	}
}

// live writes what the feed holds after the cursor; behind: the feed no
// longer reaches back to it.
func (st *stream) live(sub *feed.Subscription) (n int, behind, ok bool) {
	ep := eventBuffers.Get().(*[]feed.Event)
	defer func() {
		clear(*ep) // hold no event past the write
		eventBuffers.Put(ep)
	}()
	events, behind := sub.Next(st.after, (*ep)[:0], liveBatch)
	*ep = events
	if len(events) == 0 && !behind && sub.Gone() {
		// The conversation was removed (retention, a purge): its frames
		// are gone and the cursor can never be served again.
		st.writeError(protocol.Errorf(protocol.ReplayGap, "the conversation was removed with its frames"))
		st.flush()
		return 0, false, false
	}
	if behind || len(events) == 0 {
		return 0, behind, true
	}
	moved := false
	for _, e := range events {
		st.write(e.SSE)
		st.after = e.Sequence
		moved = moved || st.status.movedBy(e.Type)
		if len(*st.buf) >= flushAt && !st.push() {
			return 0, false, false
		}
	}
	if moved {
		st.status.writeMoved(st)
	}
	if !st.flush() {
		return 0, false, false
	}
	if frametrace.On {
		frametrace.Stamp("flushed", st.convID, events[0].Sequence, events[len(events)-1].Sequence)
	}
	st.s.metrics.framesSent.Add(int64(len(events)))
	st.frames += len(events)
	st.s.metrics.liveFlushed(events)
	return len(events), false, true
}

// buffer is the stream's write buffer, taken from the pool at the first
// write after a flush.
func (st *stream) buffer() *[]byte {
	if st.buf == nil {
		st.buf = sseBuffers.Get().(*[]byte)
		*st.buf = (*st.buf)[:0]
	}
	return st.buf
}

func (st *stream) write(b []byte) {
	p := st.buffer()
	*p = append(*p, b...)
}

// push writes out what is buffered, bounded by the write timeout: a
// client that does not read is cut off, never buffered for.
func (st *stream) push() bool {
	if st.buf == nil || len(*st.buf) == 0 {
		return true
	}
	select {
	case <-st.s.closing:
		return false // the server is closing: its streams end
	default:
	}
	// The deadline moves only once half of it is spent: a write that
	// blocks is still cut off within WriteTimeout, and a busy stream does
	// not reset a timer on every write.
	if now := time.Now(); st.deadline.Sub(now) < st.s.cfg.WriteTimeout/2 {
		st.deadline = now.Add(st.s.cfg.WriteTimeout)
		st.out.setWriteDeadline(st.deadline)
	}
	_, err := st.out.Write(*st.buf)
	*st.buf = (*st.buf)[:0]
	st.wrote = true
	return err == nil
}

// flush pushes and flushes, and gives the buffer back to the pool.
func (st *stream) flush() bool {
	ok := st.push() && st.out.flush() == nil
	st.release()
	return ok
}

func (st *stream) release() {
	if st.buf != nil {
		if cap(*st.buf) <= 2*replayFlushAt { // an outsized one goes to the GC
			sseBuffers.Put(st.buf)
		}
		st.buf = nil
	}
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
	eventBuffers = sync.Pool{New: func() any { e := make([]feed.Event, 0, liveBatch); return &e }}
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
