package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/sse"
	"github.com/studio/operator/internal/studio"
)

// The application change stream, GET /api/app/events: Server-Sent Events,
// one per committed change of a run, schedule, playbook or workflow
// (studio.ChangeEvent), with the change's number as the event id. It reads the
// change log that the writes append to in their own transactions, and
// wakes on the commits of every daemon sharing the database (the control
// signal PostgreSQL's NOTIFY carries across processes). A client
// reconnects with Last-Event-ID (or ?after=) and misses nothing the log
// still keeps; older than that, it gets a "reset" event and reloads. No
// cursor: the stream starts at the newest change.

// appEventsPage is how many changes one read of the log takes.
const appEventsPage = 500

func (s *Server) handleAppEvents(w http.ResponseWriter, r *http.Request) {
	// The cursor and the log are checked before the first byte of the
	// stream: a bad cursor is an ordinary typed error.
	cursor := r.URL.Query().Get("after")
	if cursor == "" {
		cursor = r.Header.Get("Last-Event-ID")
	}
	after, err := queryInt(cursor, -1, 0, maxCursor, "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	changed := s.cfg.App.ChangeSignal()    // before reading: no commit is missed
	access := s.cfg.Streams.AccessSignal() // before the stream: no revocation is missed
	oldest, newest, err := s.cfg.App.ChangesRange(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reset := false
	switch {
	case after < 0: // no cursor: from now on
		after = newest
	case after < oldest-1 || after > newest: // missed changes, or another database's cursor
		after, reset = newest, true
	}

	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	ev := &appEvents{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	ev.buf.WriteString("retry: 2000\n: connected\n\n")
	if reset {
		ev.event(studio.ChangeEvent{Type: studio.ChangeReset, Seq: after})
	}
	if !ev.flush() {
		return
	}
	beats := s.heartbeats()
	slot := beats.slot()
	ctx := r.Context()
	for {
		n, err := ev.replay(ctx, s.cfg.App, &after)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("app events: reading the change log failed", "err", err)
			}
			return // the client reconnects from its cursor
		}
		if !ev.flush() {
			return
		}
		if n == appEventsPage {
			continue
		}
		select {
		case <-changed:
			changed = s.cfg.App.ChangeSignal()
		case <-access:
			// Decided again, for the credential as it is now: a revoked
			// token or a lost right ends the stream at once.
			access = s.cfg.Streams.AccessSignal()
			if err := s.stillReads(ctx); err != nil {
				ev.buf.WriteString(": error " + string(protocol.ErrorOf(err).Code) + "\n\n")
				ev.flush()
				return
			}
		case <-beats.wait(slot):
			ev.buf.WriteString(": heartbeat\n\n")
			if !ev.flush() {
				return
			}
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		}
	}
}

// appEvents writes one client's change stream.
type appEvents struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

// replay writes the changes after the cursor (one page) and moves it on.
func (e *appEvents) replay(ctx context.Context, a *studio.Service, after *int64) (int, error) {
	cs, err := a.Changes(ctx, *after, appEventsPage)
	if err != nil {
		return 0, err
	}
	for _, c := range cs {
		e.event(c)
		*after = c.Seq
	}
	return len(cs), nil
}

func (e *appEvents) event(c studio.ChangeEvent) {
	b, _ := json.Marshal(c) // a struct of strings and numbers
	e.buf.WriteString("id: " + strconv.FormatInt(c.Seq, 10) + "\ndata: ")
	e.buf.Write(b)
	e.buf.WriteString("\n\n")
}

// flush writes what is buffered; false when the client is gone or too slow.
func (e *appEvents) flush() bool {
	if e.buf.Len() == 0 {
		return true
	}
	_ = e.rc.SetWriteDeadline(time.Now().Add(e.timeout))
	_, err := e.w.Write(e.buf.Bytes())
	e.buf.Reset()
	return err == nil && e.rc.Flush() == nil
}

// stillReads decides the change stream again for the request's credential
// as it is now: access_revoked when it may no longer read the cockpit.
func (s *Server) stillReads(ctx context.Context) error {
	who, err := s.reauthenticate(ctx, credentialFrom(ctx))
	if protocol.IsCode(err, protocol.AuthRequired) {
		return protocol.Errorf(protocol.AccessRevoked, "the stream's credential was revoked")
	}
	if err != nil {
		return err
	}
	if policy.Ask(s.withPolicy(ctx, who), policy.ReadStudio, policy.Studio{}) != nil {
		return protocol.Errorf(protocol.AccessRevoked, "the stream's principal may no longer read the cockpit")
	}
	return nil
}
