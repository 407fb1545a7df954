package httpapi

import (
	"github.com/studio/operator/internal/protocol"
)

// The stream's status comment: the progress of the conversation's active
// turn (queued with its position, working, retrying in N s, awaiting
// confirmation, executing) as an SSE comment line
//
//	: status {"activeTurn":{"requestId":"…","state":"retrying","attempt":2,"retryAt":1764500000.5,…}}
//
// sent when the stream opens and whenever the progress changes
// ({"activeTurn":null} once no turn runs), including a turn another
// daemon owns (movedBy). A comment, not an event: it
// carries no id and moves no cursor, frames stay the only durable log, and
// clients that only want frames (EventSource, the CLI, any SSE library)
// ignore it by the SSE rules.

// statusState is what a stream last said about progress.
type statusState struct {
	last  string
	state protocol.ProgressState // of the last status sent; "" for no turn
	// stale: the last read of the progress failed, so the client may hold
	// an old status (or none, at the stream's start); the next heartbeat's
	// tick reads it again.
	stale bool
}

// movedBy tells whether a live frame of type t may have moved the active
// turn to another state than the one last sent. The progress signal
// reports every change of a turn this daemon owns; a turn another daemon
// owns (several daemons on one PostgreSQL) is known here only by its
// frames: a turn starts (the first frames after "no turn" or "queued"),
// asks for a decision, has one, or ends. Text and tool frames of a
// working turn change nothing, so they cost no read.
func (ss *statusState) movedBy(t protocol.FrameType) bool {
	switch t {
	case protocol.FrameProposal, protocol.FrameConfirmation, protocol.FrameDone:
		return true
	}
	return ss.state == "" || ss.state == protocol.ProgressQueued
}

// write sends the status comment when it differs from the last one sent;
// it reports whether it wrote anything.
func (ss *statusState) write(st *stream) bool {
	p, err := st.s.cfg.Turns.ActiveTurn(st.ctx, st.convID)
	return ss.send(st, p, err)
}

// writeMoved is write after a frame that may have moved a turn another
// daemon owns (movedBy): the conversation's streams share one read.
func (ss *statusState) writeMoved(st *stream) bool {
	p, err := st.s.cfg.Turns.ActiveTurnAfter(st.ctx, st.convID, st.after)
	return ss.send(st, p, err)
}

func (ss *statusState) send(st *stream, p *protocol.TurnProgress, err error) bool {
	if err != nil {
		ss.stale = true // progress is a courtesy: frames and errors go their own way
		return false
	}
	ss.stale = false
	b, err := protocol.Marshal(struct {
		ActiveTurn *protocol.TurnProgress `json:"activeTurn"`
	}{p})
	if err != nil || string(b) == ss.last {
		return false
	}
	ss.last, ss.state = string(b), ""
	if p != nil {
		ss.state = p.State
	}
	st.write([]byte(": status "))
	st.write(b)
	st.write([]byte("\n\n"))
	return true
}
