package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

const conversationCols = `id, project, title, status, next_sequence, active_request_id,
	created_at, updated_at, archived_at, deleted_at, retained_from_sequence`

type scanner interface{ Scan(dest ...any) error }

func scanConversation(row scanner) (store.Conversation, error) {
	var c store.Conversation
	var project, title, active sql.NullString
	var created, updated float64
	var archived, deleted sql.NullFloat64
	err := row.Scan(&c.ID, &project, &title, &c.Status, &c.NextSequence, &active,
		&created, &updated, &archived, &deleted, &c.RetainedFrom)
	if err != nil {
		return c, err
	}
	c.Project, c.Title, c.ActiveRequestID = nullString(project), nullString(title), nullString(active)
	c.CreatedAt, c.UpdatedAt = fromTS(created), fromTS(updated)
	c.ArchivedAt, c.DeletedAt = nullTS(archived), nullTS(deleted)
	return c, nil
}

func notFound(what, id string) error {
	return protocol.Errorf(protocol.NotFound, "%s %s not found", what, id)
}

func getConversation(ctx context.Context, q querier, id string) (store.Conversation, error) {
	return loadConversation(ctx, q, id, "")
}

// lockConversation reads the conversation and locks it: the first lock of
// every write that depends on a conversation's state, so that writers of
// one conversation, in this process or another, take their turns.
func lockConversation(ctx context.Context, tx *writeTx, id string) (store.Conversation, error) {
	return loadConversation(ctx, tx, id, tx.locks.update)
}

func loadConversation(ctx context.Context, q querier, id, lock string) (store.Conversation, error) {
	c, err := scanConversation(q.QueryRowContext(ctx,
		`SELECT `+conversationCols+` FROM studio_operator_conversations WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, notFound("conversation", id)
	}
	if err != nil {
		return c, fmt.Errorf("get conversation: %w", err)
	}
	return c, nil
}

func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

const turnCols = `request_id, conversation_id, instruction, context_json, context_hash, status,
	error_code, created_at, started_at, ended_at, cancel_requested_at`

func scanTurn(row scanner) (store.Turn, error) {
	var t store.Turn
	var ctxJSON string
	var errCode sql.NullString
	var created float64
	var started, ended, cancelReq sql.NullFloat64
	err := row.Scan(&t.RequestID, &t.ConversationID, &t.Instruction, &ctxJSON, &t.ContextHash, &t.Status,
		&errCode, &created, &started, &ended, &cancelReq)
	if err != nil {
		return t, err
	}
	t.ContextJSON = jsontext.Value(ctxJSON)
	t.ErrorCode = nullString(errCode)
	t.CreatedAt = fromTS(created)
	t.StartedAt, t.EndedAt, t.CancelRequestedAt = nullTS(started), nullTS(ended), nullTS(cancelReq)
	return t, nil
}

func getTurn(ctx context.Context, q querier, id string) (store.Turn, error) {
	return loadTurn(ctx, q, id, "")
}

func loadTurn(ctx context.Context, q querier, id, lock string) (store.Turn, error) {
	t, err := scanTurn(q.QueryRowContext(ctx, `SELECT `+turnCols+` FROM studio_operator_turns WHERE request_id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, notFound("request", id)
	}
	if err != nil {
		return t, fmt.Errorf("get turn: %w", err)
	}
	return t, nil
}

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
	out := make([]store.Frame, 0, len(payloads))
	for i, p := range payloads {
		raw, err := protocol.EncodePayload(p)
		if err != nil {
			return nil, err
		}
		f := store.Frame{ConversationID: convID, Sequence: next + int64(i), RequestID: reqID,
			Type: p.FrameType(), Payload: raw, CreatedAt: protocol.Time(ts(now))}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_frames
			(conversation_id, sequence, request_id, frame_type, payload_json, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			convID, f.Sequence, reqID, string(f.Type), string(raw), ts(now)); err != nil {
			return nil, fmt.Errorf("append frame: %w", err)
		}
		out = append(out, f)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET next_sequence = ?, updated_at = ? WHERE id = ?`,
		next+int64(len(payloads)), ts(now), convID); err != nil {
		return nil, fmt.Errorf("advance sequence: %w", err)
	}
	return out, nil
}

// callerPayloads are the payloads of frames a caller appends (AppendFrames
// and the proposal transitions). Each needs a payload, and none may be done:
// done ends the turn, so only FinishTurn writes it, in the transaction that
// releases the conversation (DESIGN.md §7).
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

func appendAdminEvent(ctx context.Context, tx *writeTx, p store.AppendAdminEventParams) (store.AdminEvent, error) {
	details := p.Details
	if details == nil {
		details = jsontext.Value(`{}`)
	}
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO admin_events (created_at, actor, action, target_id, details)
		VALUES (?, ?, ?, ?, ?) RETURNING id`, ts(p.Now), p.Actor, p.Action, p.TargetID, string(details)).Scan(&id); err != nil {
		return store.AdminEvent{}, fmt.Errorf("append admin event: %w", err)
	}
	return store.AdminEvent{ID: id, CreatedAt: protocol.Time(ts(p.Now)), Actor: p.Actor, Action: p.Action,
		TargetID: p.TargetID, Details: details}, nil
}
