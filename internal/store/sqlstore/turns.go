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

const turnCols = `request_id, conversation_id, instruction, context_json, context_hash, status,
	error_code, created_at, started_at, ended_at, cancel_requested_at, owner_instance, owner_epoch, submitted_by,
	cancel_requested_by`

func scanTurn(row scanner) (store.Turn, error) {
	var t store.Turn
	var ctxJSON string
	var errCode, owner, by, cancelBy sql.NullString
	var created float64
	var started, ended, cancelReq sql.NullFloat64
	err := row.Scan(&t.RequestID, &t.ConversationID, &t.Instruction, &ctxJSON, &t.ContextHash, &t.Status,
		&errCode, &created, &started, &ended, &cancelReq, &owner, &t.Epoch, &by, &cancelBy)
	if err != nil {
		return t, err
	}
	t.Owner, t.SubmittedBy, t.CancelRequestedBy = owner.String, by.String, cancelBy.String
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
	defer s.timed("get_turn", time.Now())
	return getTurn(ctx, s.r, requestID)
}

// SubmitTurn implements store.TurnStore.
func (s *Store) SubmitTurn(ctx context.Context, p store.SubmitTurnParams) (store.Turn, store.Frame, error) {
	defer s.timed("submit_turn", time.Now())
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
			(request_id, conversation_id, instruction, context_json, context_hash, status, created_at, owner_instance, submitted_by)
			VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)`,
			p.RequestID, p.ConversationID, p.Instruction, string(p.ContextJSON), p.ContextHash, ts(p.Now), nullIfEmpty(p.Instance), emptyNull(p.SubmittedBy)); err != nil {
			return fmt.Errorf("insert turn: %w", err)
		}
		frames, err := appendFrames(ctx, tx, p.ConversationID, p.RequestID, p.Now,
			protocol.TextPayload{Content: p.Instruction, Format: "plain", Role: protocol.RoleUser})
		if err != nil {
			return err
		}
		f = frames[0]
		if p.Audit != nil {
			if _, err := appendAdminEvent(ctx, tx, *p.Audit); err != nil {
				return err
			}
		}
		tx.touch(p.ConversationID)
		t, err = getTurn(ctx, tx, p.RequestID)
		return err
	})
	return t, f, err
}

// StartTurn implements store.TurnStore.
func (s *Store) StartTurn(ctx context.Context, p store.StartTurnParams) (store.Turn, error) {
	defer s.timed("start_turn", time.Now())
	var t store.Turn
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = 'running', started_at = ?, owner_instance = ?, owner_epoch = owner_epoch + 1
			WHERE request_id = ? AND status = 'queued'`, ts(p.Now), nullIfEmpty(p.Instance), p.RequestID)
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
	defer s.timed("finish_turn", time.Now())
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
		if err := owns(p.Instance, cur); err != nil {
			return err
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

// owns refuses to let instance end a turn another instance owns: one
// whose work it took over. An empty instance, or a turn with no owner
// (parked: any daemon may continue it), passes.
func owns(instance string, t store.Turn) error {
	if instance == "" || t.Owner == "" || t.Owner == instance {
		return nil
	}
	return protocol.Errorf(protocol.Conflict, "turn %s is owned by instance %s", t.RequestID, t.Owner).
		With("status", string(t.Status)).With("owner", t.Owner)
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
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = ?, error_code = ?, ended_at = ?, owner_instance = NULL, owner_epoch = owner_epoch + 1
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
	if status == store.TurnFailed {
		if err := enqueueTurnFailed(ctx, tx, t, perr, now); err != nil {
			return nil, err
		}
	}
	return frames, nil
}

// RequestCancel implements store.TurnStore.
func (s *Store) RequestCancel(ctx context.Context, p store.RequestCancelParams) (store.Turn, []store.Frame, error) {
	defer s.timed("request_cancel", time.Now())
	var t store.Turn
	var frames []store.Frame
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockTurn(ctx, tx, p.RequestID)
		if err != nil {
			return err
		}
		tx.control(store.TurnKey(p.RequestID)) // its owner, wherever it runs, takes the cancel in
		switch cur.Status {
		case store.TurnQueued:
			if frames, err = finishTurn(ctx, tx, cur, store.TurnCancelled, nil, p.Now); err != nil {
				return err
			}
			tx.touch(cur.ConversationID)
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?, cancel_requested_by = ? WHERE request_id = ?`,
				ts(p.Now), nullIfEmpty(p.By), p.RequestID); err != nil {
				return fmt.Errorf("cancel turn: %w", err)
			}
		case store.TurnRunning, store.TurnAwaitingConfirmation:
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?, cancel_requested_by = ?
				WHERE request_id = ? AND cancel_requested_at IS NULL`, ts(p.Now), nullIfEmpty(p.By), p.RequestID); err != nil {
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
	defer s.timed("recover_turns", time.Now())
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
	defer s.timed("set_turn_context", time.Now())
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
