package postgres

import (
	"context"
	"database/sql"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/frametrace"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Frame notifications. A commit that appends frames tells the other
// processes which frames, in the notification itself (framesChannel), so
// their streams get them without reading the store: one PostgreSQL round
// trip less between a commit on one daemon and a client of another, and no
// read per commit per daemon. A notification carries at most
// maxNotifyPayload bytes (PostgreSQL's limit is 8 000): a commit's frames
// go in as many notifications as they need, and when one frame alone does
// not fit, the notification names the conversation only and the listener
// reads its frames from the store, as for the plain channel.
//
// The same commit still notifies the plain channel ("<instance>
// <conversation>"), which daemons of earlier releases listen to during a
// rolling upgrade; a listener skips it for a sender it has seen on
// framesChannel (that sender's frames notifications say it all), and
// otherwise reads the store.

// framesChannel is the NOTIFY channel of frame commits with their frames.
// The payload is "<store instance> <conversation id>" and, when the frames
// fit, " " and a JSON array of notifiedFrame: the frames themselves.
const framesChannel = "studio_operator_frame_events"

// maxNotifyPayload bounds a notification's payload, below PostgreSQL's
// 8 000 bytes.
const maxNotifyPayload = 7900

// notifiedFrame is a frame in a notification: the conversation is the
// payload's.
type notifiedFrame struct {
	Sequence  int64              `json:"s"`
	RequestID string             `json:"r"`
	Type      protocol.FrameType `json:"t"`
	Payload   jsontext.Value     `json:"p"`
	CreatedAt float64            `json:"c"` // as protocol.Timestamp: what the store keeps
}

// framePayloads are the framesChannel payloads of a commit's frames of one
// conversation, in sequence order: JSON arrays of at most
// maxNotifyPayload bytes with their prefix, or the prefix alone (read
// the store) when a frame does not fit in one or there are none.
func framePayloads(instance, conversationID string, frames []store.Frame) []string {
	prefix := instance + " " + conversationID
	room := maxNotifyPayload - len(prefix) - 1
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, prefix+" ["+b.String()+"]")
			b.Reset()
		}
	}
	for _, f := range frames {
		enc, err := json.Marshal(notifiedFrame{Sequence: f.Sequence, RequestID: f.RequestID, Type: f.Type, Payload: f.Payload, CreatedAt: protocol.Timestamp(f.CreatedAt)})
		if err != nil || len(enc)+2 > room {
			return []string{prefix}
		}
		if b.Len() > 0 && b.Len()+1+len(enc)+2 > room {
			flush()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.Write(enc)
	}
	flush()
	if len(out) == 0 {
		// Touched without frames (a status change, a purge): the listener
		// does what it does for the plain channel, a wake-up and a read.
		return []string{prefix}
	}
	return out
}

// parseFramePayload reads a framesChannel payload. ok false: the frames
// are not in it (read the store).
func parseFramePayload(payload string) (instance, conversationID string, frames []store.Frame, ok bool) {
	instance, rest, _ := strings.Cut(payload, " ")
	conversationID, list, hasList := strings.Cut(rest, " ")
	if !hasList {
		return instance, conversationID, nil, false
	}
	var nfs []notifiedFrame
	if err := json.Unmarshal([]byte(list), &nfs); err != nil {
		return instance, conversationID, nil, false
	}
	frames = make([]store.Frame, len(nfs))
	for i, f := range nfs {
		frames[i] = store.Frame{ConversationID: conversationID, Sequence: f.Sequence, RequestID: f.RequestID, Type: f.Type,
			Payload: f.Payload, CreatedAt: protocol.Time(f.CreatedAt)}
	}
	return instance, conversationID, frames, true
}

// NotifyFrames tells the other processes' listeners a commit's frames of a
// conversation (framesChannel) and, for listeners of earlier releases,
// that the conversation has new frames (channel): one statement.
func (d dialect) NotifyFrames(ctx context.Context, tx *sql.Tx, conversationID string, frames []store.Frame) error {
	if d.plainNotify {
		return d.Notify(ctx, tx, conversationID)
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p UNION ALL SELECT pg_notify($3, $4)`,
		framesChannel, framePayloads(d.instance, conversationID, frames), channel, d.instance+" "+conversationID)
	return err
}

// NotifyFramesStatement is NotifyFrames for several conversations at once
// (a batch of appends): one statement. Guarded, it notifies only if the
// transaction's append guard held (sqlstore.AppendQueries.Guard).
func (d dialect) NotifyFramesStatement(conversationIDs []string, frames [][]store.Frame, guarded bool) (string, []any) {
	where := ""
	if guarded {
		where = " WHERE " + guardHeld
	}
	plain := make([]string, len(conversationIDs))
	for i, id := range conversationIDs {
		plain[i] = d.instance + " " + id
	}
	if d.plainNotify {
		return `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p` + where, []any{channel, plain}
	}
	var payloads []string
	for i, id := range conversationIDs {
		payloads = append(payloads, framePayloads(d.instance, id, frames[i])...)
	}
	return `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p` + where + ` UNION ALL SELECT pg_notify($3, q) FROM unnest($4::text[]) AS q` + where,
		[]any{framesChannel, payloads, channel, plain}
}

// onFrames handles a framesChannel notification of another process: its
// frames go to this process's streams from memory, or are read when the
// notification could not carry them.
func (s *Store) onFrames(payload string) {
	instance, id, frames, ok := parseFramePayload(payload)
	if instance == s.instance || id == "" {
		return
	}
	s.framesSenders.Store(instance, struct{}{})
	if ok {
		if frametrace.On && len(frames) > 0 {
			frametrace.Stamp("notified", id, frames[0].Sequence, frames[len(frames)-1].Sequence)
		}
		s.Feed().Publish(store.Wire(frames))
		if frametrace.On && len(frames) > 0 {
			frametrace.Stamp("published", id, frames[0].Sequence, frames[len(frames)-1].Sequence)
		}
	} else {
		s.Feed().Refresh(id)
	}
	s.signals.Notify(id)
}
