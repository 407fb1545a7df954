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

// CreateConversation implements store.ConversationStore.
func (s *Store) CreateConversation(ctx context.Context, p store.CreateConversationParams) (store.Conversation, error) {
	var c store.Conversation
	err := s.txn(ctx, func(tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_conversations
			(id, project, title, status, next_sequence, created_at, updated_at)
			VALUES (?, ?, ?, 'active', 1, ?, ?)`, p.ID, p.Project, p.Title, ts(p.Now), ts(p.Now))
		if err != nil {
			return fmt.Errorf("create conversation: %w", err)
		}
		c, err = getConversation(ctx, tx, p.ID)
		return err
	})
	return c, err
}

// GetConversation implements store.ConversationStore.
func (s *Store) GetConversation(ctx context.Context, id string) (store.Conversation, error) {
	return getConversation(ctx, s.r, id)
}

// ListConversations implements store.ConversationStore.
func (s *Store) ListConversations(ctx context.Context, p store.ListConversationsParams) ([]store.Conversation, error) {
	query := `SELECT ` + conversationCols + ` FROM studio_operator_conversations WHERE `
	var args []any
	if p.Status == "" {
		query += `status IN ('active', 'archived')`
	} else {
		query += `status = ?`
		args = append(args, p.Status)
	}
	if p.AfterCreated != nil {
		query += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, ts(*p.AfterCreated), ts(*p.AfterCreated), p.AfterID)
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limitOr(p.Limit, 50))
	return collect(ctx, s.r, "list conversations", scanConversation, query, args...)
}

func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// UpdateConversation implements store.ConversationStore.
func (s *Store) UpdateConversation(ctx context.Context, p store.UpdateConversationParams) (store.Conversation, error) {
	var c store.Conversation
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockConversation(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if cur.Status == store.ConversationDeleted {
			return notFound("conversation", p.ID)
		}
		if err := archivedTitle(cur, p); err != nil {
			return err
		}
		if p.Title != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET title = ?, updated_at = ? WHERE id = ?`,
				*p.Title, ts(p.Now), p.ID); err != nil {
				return fmt.Errorf("rename conversation: %w", err)
			}
		}
		if p.Status != nil && *p.Status != cur.Status {
			if cur.ActiveRequestID != nil {
				return protocol.Errorf(protocol.Conflict, "conversation has an active turn").With("activeRequestId", *cur.ActiveRequestID)
			}
			var archivedAt any
			switch *p.Status {
			case store.ConversationArchived:
				archivedAt = ts(p.Now)
			case store.ConversationActive:
			default:
				return protocol.Errorf(protocol.Validation, "status must be active or archived")
			}
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations
				SET status = ?, archived_at = ?, updated_at = ? WHERE id = ?`,
				*p.Status, archivedAt, ts(p.Now), p.ID); err != nil {
				return fmt.Errorf("set conversation status: %w", err)
			}
			if err := expireEffectsOf(ctx, tx, p.ID, p.Now); err != nil {
				return err
			}
			tx.touch(p.ID)
		}
		c, err = getConversation(ctx, tx, p.ID)
		return err
	})
	return c, err
}

// DeleteConversation implements store.ConversationStore.
func (s *Store) DeleteConversation(ctx context.Context, p store.DeleteConversationParams) (store.Conversation, error) {
	var c store.Conversation
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockConversation(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if cur.Status == store.ConversationDeleted {
			return notFound("conversation", p.ID)
		}
		if cur.ActiveRequestID != nil {
			return protocol.Errorf(protocol.Conflict, "conversation has an active turn; cancel it first").With("activeRequestId", *cur.ActiveRequestID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations
			SET status = 'deleted', deleted_at = ?, updated_at = ? WHERE id = ?`, ts(p.Now), ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("delete conversation: %w", err)
		}
		if err := expireEffectsOf(ctx, tx, p.ID, p.Now); err != nil {
			return err
		}
		tx.touch(p.ID)
		c, err = getConversation(ctx, tx, p.ID)
		return err
	})
	return c, err
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

// lockTurn reads a turn that the transaction goes on to change. Where rows
// are locked it locks the turn after its conversation (the order every
// writer keeps) and reads it as it is now: a concurrent transition that
// committed while this one waited is seen. Not found stays not found.
func lockTurn(ctx context.Context, tx *writeTx, id string) (store.Turn, error) {
	t, err := getTurn(ctx, tx, id)
	if err != nil || !tx.locks.rows() {
		return t, err
	}
	if _, err := lockConversation(ctx, tx, t.ConversationID); err != nil {
		return t, err
	}
	return loadTurn(ctx, tx, id, tx.locks.update)
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

// GetTurn implements store.TurnStore.
func (s *Store) GetTurn(ctx context.Context, requestID string) (store.Turn, error) {
	return getTurn(ctx, s.r, requestID)
}

// SubmitTurn implements store.TurnStore.
func (s *Store) SubmitTurn(ctx context.Context, p store.SubmitTurnParams) (store.Turn, store.Frame, error) {
	var t store.Turn
	var f store.Frame
	err := s.txn(ctx, func(tx *writeTx) error {
		c, err := lockConversation(ctx, tx, p.ConversationID)
		if err != nil {
			return err
		}
		switch {
		case c.Status == store.ConversationDeleted:
			return notFound("conversation", p.ConversationID)
		case c.Status == store.ConversationArchived:
			return protocol.Errorf(protocol.Conflict, "conversation is archived and read-only")
		case c.ActiveRequestID != nil:
			return protocol.Errorf(protocol.Conflict, "conversation already has an active turn").With("activeRequestId", *c.ActiveRequestID)
		case c.LastSequence() != p.ExpectedLastSequence:
			return protocol.Errorf(protocol.StaleContext, "expected last sequence %d, conversation is at %d", p.ExpectedLastSequence, c.LastSequence()).
				With("actualLastSequence", c.LastSequence())
		}
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations
			SET active_request_id = ?, updated_at = ? WHERE id = ? AND active_request_id IS NULL`,
			p.RequestID, ts(p.Now), p.ConversationID)
		if err != nil {
			return fmt.Errorf("claim conversation: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return protocol.Errorf(protocol.Conflict, "conversation already has an active turn")
		}
		if err := expireEffectsOf(ctx, tx, p.ConversationID, p.Now); err != nil { // superseded by this turn
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_turns
			(request_id, conversation_id, instruction, context_json, context_hash, status, created_at)
			VALUES (?, ?, ?, ?, ?, 'queued', ?)`,
			p.RequestID, p.ConversationID, p.Instruction, string(p.ContextJSON), p.ContextHash, ts(p.Now)); err != nil {
			return fmt.Errorf("insert turn: %w", err)
		}
		frames, err := appendFrames(ctx, tx, p.ConversationID, p.RequestID, p.Now,
			protocol.TextPayload{Content: p.Instruction, Format: "plain", Role: protocol.RoleUser})
		if err != nil {
			return err
		}
		f = frames[0]
		tx.touch(p.ConversationID)
		t, err = getTurn(ctx, tx, p.RequestID)
		return err
	})
	return t, f, err
}

// StartTurn implements store.TurnStore.
func (s *Store) StartTurn(ctx context.Context, p store.StartTurnParams) (store.Turn, error) {
	var t store.Turn
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = 'running', started_at = ?
			WHERE request_id = ? AND status = 'queued'`, ts(p.Now), p.RequestID)
		if err != nil {
			return fmt.Errorf("start turn: %w", err)
		}
		t, err = getTurn(ctx, tx, p.RequestID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return protocol.Errorf(protocol.Conflict, "turn is %s, not queued", t.Status).With("status", string(t.Status))
		}
		return nil
	})
	return t, err
}

// FinishTurn implements store.TurnStore.
func (s *Store) FinishTurn(ctx context.Context, p store.FinishTurnParams) (store.Turn, []store.Frame, error) {
	var t store.Turn
	var frames []store.Frame
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockTurn(ctx, tx, p.RequestID)
		if err != nil {
			return err
		}
		if cur.Status.Terminal() {
			return protocol.Errorf(protocol.Conflict, "turn already ended %s", cur.Status).With("status", string(cur.Status))
		}
		frames, err = finishTurn(ctx, tx, cur, p.Status, p.Error, p.Now)
		if err != nil {
			return err
		}
		tx.touch(cur.ConversationID)
		t, err = getTurn(ctx, tx, p.RequestID)
		return err
	})
	return t, frames, err
}

// finishTurn appends the optional error frame and the done frame, sets the
// terminal status and releases the conversation: the one place a turn ends.
func finishTurn(ctx context.Context, tx *writeTx, t store.Turn, status store.TurnStatus, perr *protocol.Error, now time.Time) ([]store.Frame, error) {
	if !status.Terminal() {
		return nil, fmt.Errorf("finish turn: %s is not a terminal status", status)
	}
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT next_sequence FROM studio_operator_conversations WHERE id = ?`+tx.locks.update,
		t.ConversationID).Scan(&next); err != nil {
		return nil, fmt.Errorf("finish turn: %w", err)
	}
	var payloads []protocol.Payload
	var code any
	if perr != nil {
		payloads = append(payloads, protocol.ErrorPayload{Error: *perr})
		code = string(perr.Code)
	} else if status == store.TurnCancelled {
		code = string(protocol.Cancelled)
	}
	doneSeq := next + int64(len(payloads))
	payloads = append(payloads, protocol.DonePayload{Outcome: status.Outcome(), LastSequence: doneSeq})
	frames, err := appendFrames(ctx, tx, t.ConversationID, t.RequestID, now, payloads...)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = ?, error_code = ?, ended_at = ?
		WHERE request_id = ?`, status, code, ts(now), t.RequestID); err != nil {
		return nil, fmt.Errorf("finish turn: %w", err)
	}
	if status == store.TurnCancelled {
		// A cancelled turn was asked to cancel, at the latest now.
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?
			WHERE request_id = ? AND cancel_requested_at IS NULL`, ts(now), t.RequestID); err != nil {
			return nil, fmt.Errorf("finish turn: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET active_request_id = NULL, updated_at = ?
		WHERE id = ? AND active_request_id = ?`, ts(now), t.ConversationID, t.RequestID); err != nil {
		return nil, fmt.Errorf("release conversation: %w", err)
	}
	return frames, nil
}

// RequestCancel implements store.TurnStore.
func (s *Store) RequestCancel(ctx context.Context, p store.RequestCancelParams) (store.Turn, []store.Frame, error) {
	var t store.Turn
	var frames []store.Frame
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockTurn(ctx, tx, p.RequestID)
		if err != nil {
			return err
		}
		switch cur.Status {
		case store.TurnQueued:
			if frames, err = finishTurn(ctx, tx, cur, store.TurnCancelled, nil, p.Now); err != nil {
				return err
			}
			tx.touch(cur.ConversationID)
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ? WHERE request_id = ?`,
				ts(p.Now), p.RequestID); err != nil {
				return fmt.Errorf("cancel turn: %w", err)
			}
		case store.TurnRunning, store.TurnAwaitingConfirmation:
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?
				WHERE request_id = ? AND cancel_requested_at IS NULL`, ts(p.Now), p.RequestID); err != nil {
				return fmt.Errorf("cancel turn: %w", err)
			}
		}
		t, err = getTurn(ctx, tx, p.RequestID)
		return err
	})
	return t, frames, err
}

// RecoverTurns implements store.TurnStore.
func (s *Store) RecoverTurns(ctx context.Context, p store.RecoverTurnsParams) ([]store.Turn, error) {
	ids, err := collect(ctx, s.w, "recover turns", scanString, `SELECT request_id FROM studio_operator_turns
		WHERE status IN ('queued', 'running') ORDER BY created_at`)
	if err != nil {
		return nil, err
	}
	var out []store.Turn
	for _, id := range ids {
		perr := protocol.Errorf(protocol.ServiceRestarted, "the daemon restarted while this turn was running; it did not complete")
		t, _, err := s.FinishTurn(ctx, store.FinishTurnParams{RequestID: id, Status: store.TurnFailed, Error: perr, Now: p.Now})
		if protocol.IsCode(err, protocol.Conflict) {
			continue // ended meanwhile
		}
		if err != nil {
			return out, err
		}
		out = append(out, t)
	}
	return out, nil
}

// SetTurnContext implements store.TurnStore.
func (s *Store) SetTurnContext(ctx context.Context, p store.SetTurnContextParams) error {
	return s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET context_json = ?, context_hash = ? WHERE request_id = ?`,
			string(p.ContextJSON), p.ContextHash, p.RequestID)
		if err != nil {
			return fmt.Errorf("set turn context: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notFound("request", p.RequestID)
		}
		return nil
	})
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

// AppendFrames implements store.FrameStore.
func (s *Store) AppendFrames(ctx context.Context, p store.AppendFramesParams) ([]store.Frame, error) {
	var frames []store.Frame
	err := s.txn(ctx, func(tx *writeTx) error {
		c, err := lockConversation(ctx, tx, p.ConversationID)
		if err != nil {
			return err
		}
		if c.ActiveRequestID == nil || *c.ActiveRequestID != p.RequestID {
			return protocol.Errorf(protocol.Conflict, "request %s is not the conversation's active turn", p.RequestID)
		}
		payloads, err := callerPayloads(p.Frames)
		if err != nil {
			return err
		}
		frames, err = appendFrames(ctx, tx, p.ConversationID, p.RequestID, p.Now, payloads...)
		tx.touch(p.ConversationID)
		return err
	})
	return frames, err
}

// ListFrames implements store.FrameStore.
func (s *Store) ListFrames(ctx context.Context, p store.ListFramesParams) ([]store.Frame, error) {
	query := `SELECT conversation_id, sequence, request_id, frame_type, payload_json, created_at
		FROM studio_operator_frames WHERE conversation_id = ? AND sequence > ?`
	args := []any{p.ConversationID, p.AfterSequence}
	if p.RequestID != "" {
		query += ` AND request_id = ?`
		args = append(args, p.RequestID)
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

// CreateStreamTicket implements store.TicketStore.
func (s *Store) CreateStreamTicket(ctx context.Context, p store.CreateStreamTicketParams) error {
	return s.txn(ctx, func(tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_stream_tickets
			(ticket_hash, conversation_id, after_sequence, expires_at, created_at) VALUES (?, ?, ?, ?, ?)`,
			p.TicketHash, p.ConversationID, p.AfterSequence, ts(p.ExpiresAt), ts(p.Now)); err != nil {
			return fmt.Errorf("create stream ticket: %w", err)
		}
		// Spent and expired tickets are of no further use; keep the table small.
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_stream_tickets WHERE expires_at < ?`, ts(p.Now)-3600); err != nil {
			return fmt.Errorf("prune stream tickets: %w", err)
		}
		return nil
	})
}

// RedeemStreamTicket implements store.TicketStore.
func (s *Store) RedeemStreamTicket(ctx context.Context, p store.RedeemStreamTicketParams) (store.StreamTicket, error) {
	var t store.StreamTicket
	err := s.txn(ctx, func(tx *writeTx) error {
		var expires, created float64
		var used sql.NullFloat64
		err := tx.QueryRowContext(ctx, `UPDATE studio_operator_stream_tickets SET used_at = ?
			WHERE ticket_hash = ? AND used_at IS NULL AND expires_at > ?
			RETURNING ticket_hash, conversation_id, after_sequence, expires_at, created_at, used_at`,
			ts(p.Now), p.TicketHash, ts(p.Now)).Scan(&t.TicketHash, &t.ConversationID, &t.AfterSequence, &expires, &created, &used)
		if errors.Is(err, sql.ErrNoRows) {
			return protocol.Errorf(protocol.AuthRequired, "stream ticket is unknown, used or expired")
		}
		if err != nil {
			return fmt.Errorf("redeem stream ticket: %w", err)
		}
		t.ExpiresAt, t.CreatedAt, t.UsedAt = fromTS(expires), fromTS(created), nullTS(used)
		return nil
	})
	return t, err
}

// AppendAdminEvent implements store.AuditStore.
func (s *Store) AppendAdminEvent(ctx context.Context, p store.AppendAdminEventParams) (store.AdminEvent, error) {
	var e store.AdminEvent
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		e, err = appendAdminEvent(ctx, tx, p)
		return err
	})
	return e, err
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

// ListAdminEvents implements store.AuditStore.
func (s *Store) ListAdminEvents(ctx context.Context, p store.ListAdminEventsParams) ([]store.AdminEvent, error) {
	query := `SELECT id, created_at, actor, action, target_id, details FROM admin_events WHERE 1 = 1`
	var args []any
	if p.Action != "" {
		query += ` AND action = ?`
		args = append(args, p.Action)
	}
	if p.TargetID != "" {
		query += ` AND target_id = ?`
		args = append(args, p.TargetID)
	}
	if p.BeforeID > 0 {
		query += ` AND id < ?`
		args = append(args, p.BeforeID)
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limitOr(p.Limit, 50))
	return collect(ctx, s.r, "list admin events", scanAdminEvent, query, args...)
}

func scanAdminEvent(row scanner) (store.AdminEvent, error) {
	var e store.AdminEvent
	var created float64
	var target sql.NullString
	var details string
	if err := row.Scan(&e.ID, &created, &e.Actor, &e.Action, &target, &details); err != nil {
		return e, err
	}
	e.CreatedAt, e.TargetID, e.Details = fromTS(created), nullString(target), jsontext.Value(details)
	return e, nil
}
