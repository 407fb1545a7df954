package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// appendFrames gives each payload the conversation's next sequence and
// advances next_sequence, inside the caller's transaction.
func appendFrames(ctx context.Context, tx *writeTx, convID, reqID string, now time.Time, payloads ...protocol.Payload) ([]store.Frame, error) {
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT next_sequence FROM studio_operator_conversations WHERE id = ?`+tx.locks.update,
		convID).Scan(&next); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("conversation", convID)
		}
		return nil, fmt.Errorf("append frames: %w", err)
	}
	return insertFrames(ctx, tx, convID, reqID, next, now, payloads)
}

// insertFrames writes payloads as the frames from sequence next on and
// advances next_sequence past them: next must be the conversation's
// next_sequence, read under the transaction's lock.
func insertFrames(ctx context.Context, tx *writeTx, convID, reqID string, next int64, now time.Time, payloads []protocol.Payload) ([]store.Frame, error) {
	encoded, err := encodePayloads(payloads)
	if err != nil {
		return nil, err
	}
	return insertEncoded(ctx, tx, convID, reqID, next, now, encoded)
}

// encodedPayload is a payload validated and encoded, ready for its row.
type encodedPayload struct {
	typ protocol.FrameType
	raw jsontext.Value
}

// encodePayloads validates and encodes payloads. AppendFrames does it
// before its transaction reaches the writer loop, where every microsecond
// is every caller's (a long text frame costs tens of them to encode).
func encodePayloads(payloads []protocol.Payload) ([]encodedPayload, error) {
	out := make([]encodedPayload, len(payloads))
	for i, p := range payloads {
		raw, err := protocol.EncodePayload(p)
		if err != nil {
			return nil, err
		}
		out[i] = encodedPayload{typ: p.FrameType(), raw: raw}
	}
	return out, nil
}

// insertEncoded is insertFrames for payloads encoded already. The rows go
// in multi-row INSERTs (frameInsertChunks) and the sequence advances once.
func insertEncoded(ctx context.Context, tx *writeTx, convID, reqID string, next int64, now time.Time, payloads []encodedPayload) ([]store.Frame, error) {
	out := make([]store.Frame, len(payloads))
	created := ts(now)
	for i, p := range payloads {
		out[i] = store.Frame{ConversationID: convID, Sequence: next + int64(i), RequestID: reqID,
			Type: p.typ, Payload: p.raw, CreatedAt: protocol.Time(created)}
	}
	args := make([]any, 0, frameColumns*min(len(out), frameInsertChunks[0]))
	for rest := out; len(rest) > 0; {
		n := frameChunk(len(rest))
		args = args[:0]
		for _, f := range rest[:n] {
			args = append(args, convID, f.Sequence, reqID, string(f.Type), payloadText(f.Payload), created)
		}
		if _, err := tx.ExecContext(ctx, frameInserts[n], args...); err != nil {
			return nil, fmt.Errorf("append frame: %w", err)
		}
		rest = rest[n:]
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET next_sequence = ?, updated_at = ? WHERE id = ?`,
		next+int64(len(payloads)), created, convID); err != nil {
		return nil, fmt.Errorf("advance sequence: %w", err)
	}
	tx.appended = append(tx.appended, out...)
	return out, nil
}

// payloadText is an encoded payload as the text its column takes, without
// a copy: the drivers copy a parameter into their own buffers (an 8 KiB
// frame's copy here was a twentieth of the writer's time), and nothing
// changes an encoded payload, which the frames handed to the streams
// share.
func payloadText(v jsontext.Value) string { return unsafe.String(unsafe.SliceData(v), len(v)) }

// frameColumns is the values of one frame's row.
const frameColumns = 6

// frameInsertChunks are the row counts of the frame INSERTs, largest
// first: a few fixed statements the writer keeps prepared, whatever the
// sizes of the appends (a count of their own would prepare a statement per
// size). 256 rows are 1 536 values, far below either backend's limit.
var frameInsertChunks = []int{64, 16, 4, 1}

// frameInserts is the INSERT of n frames, for each n of frameInsertChunks.
var frameInserts = func() map[int]string {
	m := make(map[int]string, len(frameInsertChunks))
	for _, n := range frameInsertChunks {
		var b strings.Builder
		b.WriteString(`INSERT INTO studio_operator_frames (conversation_id, sequence, request_id, frame_type, payload_json, created_at) VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
		}
		m[n] = b.String()
	}
	return m
}()

// frameChunk is the rows of the next INSERT for n frames still to write.
func frameChunk(n int) int {
	for _, c := range frameInsertChunks {
		if c <= n {
			return c
		}
	}
	return 1
}

// callerPayloads are the payloads of frames a caller appends (AppendFrames
// and the proposal transitions). Each needs a payload, and none may be done:
// done ends the turn, so only FinishTurn writes it, in the transaction that
// releases the conversation (docs/design.md §6).
func callerPayloads(frames []store.NewFrame) ([]protocol.Payload, error) {
	payloads := make([]protocol.Payload, len(frames))
	for i, f := range frames {
		switch {
		case f.Payload == nil:
			return nil, protocol.Errorf(protocol.Validation, "frame %d has no payload", i)
		case f.Payload.FrameType() == protocol.FrameDone:
			return nil, protocol.Errorf(protocol.Validation, "done frames are written by FinishTurn alone")
		}
		payloads[i] = f.Payload
	}
	return payloads, nil
}

// AppendFrames implements store.FrameStore.
func (s *Store) AppendFrames(ctx context.Context, p store.AppendFramesParams) ([]store.Frame, error) {
	defer s.timed("append_frames", time.Now())
	payloads, err := callerPayloads(p.Frames)
	if err != nil {
		return nil, err
	}
	encoded, err := encodePayloads(payloads)
	if err != nil {
		return nil, err
	}
	if instance, ok := s.batchable(ctx); ok && len(encoded) > 0 {
		a := &appendJob{convID: p.ConversationID, reqID: p.RequestID, now: p.Now, payloads: encoded, instance: instance}
		switch err := s.appends.submit(ctx, a); {
		case err == nil:
			return a.frames, nil
		case err != errAlone:
			return nil, err
		}
		// The batch could not write it: the ordinary way, below.
	}
	var app *appendJob
	if instance, ok := s.mergeable(ctx); ok && len(encoded) > 0 {
		app = &appendJob{convID: p.ConversationID, reqID: p.RequestID, now: p.Now, payloads: encoded, instance: instance}
	}
	var frames []store.Frame
	err = s.txnAppend(ctx, func(tx *writeTx) error {
		// The hot path: one read, locked, of what the append checks and
		// needs (lockConversation reads the whole row).
		var active sql.NullString
		var next int64
		err := tx.QueryRowContext(ctx, `SELECT active_request_id, next_sequence FROM studio_operator_conversations WHERE id = ?`+tx.locks.update,
			p.ConversationID).Scan(&active, &next)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("conversation", p.ConversationID)
		}
		if err != nil {
			return fmt.Errorf("append frames: %w", err)
		}
		if active.String != p.RequestID || !active.Valid {
			return protocol.Errorf(protocol.Conflict, "request %s is not the conversation's active turn", p.RequestID)
		}
		if f, ok := store.FenceFrom(ctx); ok {
			// An owner appends only to a turn it still owns; the
			// conversation's lock orders this after a takeover.
			var owner sql.NullString
			if err := tx.QueryRowContext(ctx, `SELECT owner_instance FROM studio_operator_turns WHERE request_id = ?`,
				p.RequestID).Scan(&owner); err != nil {
				return fmt.Errorf("append frames: %w", err)
			}
			if owner.String != f.Instance {
				return store.Fenced("turn %s is owned by %q, no longer by instance %s", p.RequestID, owner.String, f.Instance).
					With("instance", f.Instance)
			}
		}
		frames, err = insertEncoded(ctx, tx, p.ConversationID, p.RequestID, next, p.Now, encoded)
		tx.touch(p.ConversationID)
		return err
	}, app)
	if err == nil && app != nil && app.frames != nil {
		frames = app.frames // the loop merged it
	}
	return frames, err
}

// turnRange is the condition that bounds a statement's frames to one
// turn's range on the frames' primary key (conversation_id, sequence),
// given the SQL of the turn's request id (a placeholder, or a scalar
// subquery with its own): the frames have no index by request, and a
// filter on request_id alone would read the conversation's whole history.
// A turn's range runs from its first frame (none while it waits: an empty
// range) to its done frame (the newest while it runs); an unknown turn's
// is empty.
func turnRange(requestID string) string {
	return `sequence BETWEEN coalesce((SELECT first_sequence FROM studio_operator_turns WHERE request_id = ` + requestID + `), ` + maxSequence + `)
		AND coalesce((SELECT coalesce(last_sequence, ` + maxSequence + `) FROM studio_operator_turns WHERE request_id = ` + requestID + `), 0)`
}

// maxSequence is the largest sequence either backend stores (a signed
// 64-bit integer).
const maxSequence = "9223372036854775807"

// CountFrames implements store.FrameStore.
func (s *Store) CountFrames(ctx context.Context, p store.CountFramesParams) (int64, error) {
	defer s.timed("count_frames", time.Now())
	query := `SELECT COUNT(*) FROM studio_operator_frames WHERE conversation_id = ? AND request_id = ? AND ` + turnRange("?")
	args := []any{p.ConversationID, p.RequestID, p.RequestID, p.RequestID}
	if p.Type != "" {
		query += ` AND frame_type = ?`
		args = append(args, string(p.Type))
	}
	var n int64
	if err := s.r.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count frames: %w", err)
	}
	return n, nil
}

// ListFrames implements store.FrameStore.
func (s *Store) ListFrames(ctx context.Context, p store.ListFramesParams) ([]store.Frame, error) {
	defer s.timed("list_frames", time.Now())
	query := `SELECT conversation_id, sequence, request_id, frame_type, payload_json, created_at
		FROM studio_operator_frames WHERE conversation_id = ? AND sequence > ?`
	args := []any{p.ConversationID, p.AfterSequence}
	if p.RequestID != "" {
		query += ` AND request_id = ? AND ` + turnRange("?")
		args = append(args, p.RequestID, p.RequestID, p.RequestID)
	}
	// Replay's hot path: scanning into locals of this loop keeps the row
	// free of the allocation a scan through the scanner interface costs.
	rows, err := s.r.QueryContext(ctx, query+` ORDER BY sequence LIMIT ?`, append(args, limitOr(p.Limit, 500))...)
	if err != nil {
		return nil, fmt.Errorf("list frames: %w", err)
	}
	defer rows.Close()
	var out []store.Frame
	for rows.Next() {
		var f store.Frame
		var payload string
		var created float64
		if err := rows.Scan(&f.ConversationID, &f.Sequence, &f.RequestID, &f.Type, &payload, &created); err != nil {
			return nil, fmt.Errorf("list frames: %w", err)
		}
		f.Payload, f.CreatedAt = jsontext.Value(payload), fromTS(created)
		out = append(out, f)
	}
	return out, rows.Err()
}
