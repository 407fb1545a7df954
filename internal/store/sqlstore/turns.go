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
	cancel_requested_by, queue_order, interrupts`

func scanTurn(row scanner) (store.Turn, error) {
	var t store.Turn
	var ctxJSON string
	var errCode, owner, by, cancelBy, interrupts sql.NullString
	var created float64
	var started, ended, cancelReq sql.NullFloat64
	var order sql.NullInt64
	err := row.Scan(&t.RequestID, &t.ConversationID, &t.Instruction, &ctxJSON, &t.ContextHash, &t.Status,
		&errCode, &created, &started, &ended, &cancelReq, &owner, &t.Epoch, &by, &cancelBy, &order, &interrupts)
	if err != nil {
		return t, err
	}
	t.Owner, t.SubmittedBy, t.CancelRequestedBy, t.Interrupts = owner.String, by.String, cancelBy.String, interrupts.String
	if order.Valid {
		t.QueueOrder = &order.Int64
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
		case c.ActiveRequestID != nil && !p.WhenBusy.Waits():
			return protocol.Errorf(protocol.Conflict, "conversation already has an active turn").With("activeRequestId", *c.ActiveRequestID)
		}
		if err := checkSeen(ctx, tx, c, p); err != nil {
			return err
		}
		if c.ActiveRequestID != nil {
			t, err = submitWaiting(ctx, tx, *c.ActiveRequestID, p)
			return err
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
		// Its instruction, below, is its first frame.
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_turns
			(request_id, conversation_id, instruction, context_json, context_hash, status, created_at, owner_instance, submitted_by, first_sequence)
			VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)`,
			p.RequestID, p.ConversationID, p.Instruction, string(p.ContextJSON), p.ContextHash, ts(p.Now), nullIfEmpty(p.Instance), emptyNull(p.SubmittedBy),
			c.NextSequence); err != nil {
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

// checkSeen is the submission's check that the client saw the
// conversation as it is: its expected last sequence is the last one, or,
// for a submission that may wait, at least the first sequence of the
// newest turn (it saw that turn begin; its frames may still be coming).
func checkSeen(ctx context.Context, tx *writeTx, c store.Conversation, p store.SubmitTurnParams) error {
	last := c.LastSequence()
	if p.ExpectedLastSequence == last {
		return nil
	}
	stale := protocol.Errorf(protocol.StaleContext, "expected last sequence %d, conversation is at %d", p.ExpectedLastSequence, last).
		With("actualLastSequence", last)
	if !p.WhenBusy.Waits() || p.ExpectedLastSequence > last {
		return stale
	}
	// The newest turn's first frame still stored, within its range.
	var first int64
	const newest = `(SELECT request_id FROM studio_operator_frames WHERE conversation_id = ? AND sequence = ?)`
	err := tx.QueryRowContext(ctx, `SELECT sequence FROM studio_operator_frames
		WHERE conversation_id = ? AND request_id = `+newest+` AND `+turnRange(newest)+`
		ORDER BY sequence LIMIT 1`, c.ID, c.ID, last, c.ID, last, c.ID, last).Scan(&first)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return stale
	case err != nil:
		return fmt.Errorf("newest turn: %w", err)
	case p.ExpectedLastSequence < first:
		return stale
	}
	return nil
}

// submitWaiting stores a turn that waits behind the active one: last in
// line for enqueue, first for interrupt, which also records the active
// turn's cancel (its owner, wherever it runs, is notified).
func submitWaiting(ctx context.Context, tx *writeTx, active string, p store.SubmitTurnParams) (store.Turn, error) {
	var n int
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), MIN(queue_order), MAX(queue_order) FROM studio_operator_turns
		WHERE conversation_id = ? AND queue_order IS NOT NULL`, p.ConversationID).Scan(&n, &lo, &hi); err != nil {
		return store.Turn{}, fmt.Errorf("waiting turns: %w", err)
	}
	if n >= protocol.MaxWaitingTurns {
		return store.Turn{}, protocol.Errorf(protocol.Conflict, "%d turns already wait behind the active one", n).
			With("activeRequestId", active).With("limit", "waitingTurns")
	}
	order := hi.Int64 + 1
	var interrupts any
	if p.WhenBusy == protocol.WhenBusyInterrupt {
		order, interrupts = lo.Int64-1, active
		if !lo.Valid {
			order = 0
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?
			WHERE request_id = ? AND cancel_requested_at IS NULL AND status IN ('queued', 'running', 'awaiting_confirmation')`,
			ts(p.Now), active); err != nil {
			return store.Turn{}, fmt.Errorf("interrupt turn: %w", err)
		}
		tx.control(store.TurnKey(active))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_turns
		(request_id, conversation_id, instruction, context_json, context_hash, status, created_at, submitted_by, queue_order, interrupts)
		VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)`,
		p.RequestID, p.ConversationID, p.Instruction, string(p.ContextJSON), p.ContextHash, ts(p.Now), emptyNull(p.SubmittedBy),
		order, interrupts); err != nil {
		return store.Turn{}, fmt.Errorf("insert turn: %w", err)
	}
	if p.Audit != nil {
		if _, err := appendAdminEvent(ctx, tx, *p.Audit); err != nil {
			return store.Turn{}, err
		}
	}
	// The active turn's owner looks again: its conversation's line changed.
	tx.control(store.TurnKey(active))
	return getTurn(ctx, tx, p.RequestID)
}

// ListWaitingTurns implements store.TurnStore.
func (s *Store) ListWaitingTurns(ctx context.Context, conversationID string) ([]store.Turn, error) {
	defer s.timed("list_waiting_turns", time.Now())
	return collect(ctx, s.r, "waiting turns", scanTurn, `SELECT `+turnCols+` FROM studio_operator_turns
		WHERE conversation_id = ? AND queue_order IS NOT NULL ORDER BY queue_order`, conversationID)
}

// promoteWaiting makes the first turn waiting behind the conversation's
// (just released) active turn the active one, in the transaction that
// ended the other: its instruction frame is stored, effects of earlier
// turns expire, and it is queued for any instance to claim. A waiting turn
// whose cancel was requested ends here, cancelled, before it ever runs,
// and the next one comes (finishTurn calls back here).
func promoteWaiting(ctx context.Context, tx *writeTx, convID string, now time.Time) error {
	w, err := scanTurn(tx.QueryRowContext(ctx, `SELECT `+turnCols+` FROM studio_operator_turns
		WHERE conversation_id = ? AND queue_order IS NOT NULL ORDER BY queue_order LIMIT 1`, convID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("waiting turn: %w", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET active_request_id = ?, updated_at = ?
		WHERE id = ? AND active_request_id IS NULL`, w.RequestID, ts(now), convID)
	if err != nil {
		return fmt.Errorf("promote turn: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil // not released (a turn that was not the active one ended)
	}
	if err := expireEffectsOf(ctx, tx, convID, now); err != nil {
		return err
	}
	frames, err := appendFrames(ctx, tx, convID, w.RequestID, now,
		protocol.TextPayload{Content: w.Instruction, Format: "plain", Role: protocol.RoleUser})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET queue_order = NULL, first_sequence = ? WHERE request_id = ?`,
		frames[0].Sequence, w.RequestID); err != nil {
		return fmt.Errorf("promote turn: %w", err)
	}
	w.QueueOrder = nil
	tx.touch(convID)
	tx.control(store.TurnKey(w.RequestID))
	if w.CancelRequestedAt != nil {
		_, err := finishTurn(ctx, tx, w, store.TurnCancelled, nil, now)
		return err
	}
	tx.control(store.TurnsQueued) // for any instance with a free worker to claim
	return nil
}

// StartTurn implements store.TurnStore.
func (s *Store) StartTurn(ctx context.Context, p store.StartTurnParams) (store.Turn, error) {
	defer s.timed("start_turn", time.Now())
	var t store.Turn
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = 'running', started_at = ?, owner_instance = ?, owner_epoch = owner_epoch + 1
			WHERE request_id = ? AND status = 'queued' AND queue_order IS NULL`, ts(p.Now), nullIfEmpty(p.Instance), p.RequestID)
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
		if cur.Waiting() {
			return protocol.Errorf(protocol.Conflict, "turn %s waits behind another and has not started", cur.RequestID).With("status", string(cur.Status))
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
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = ?, error_code = ?, ended_at = ?, owner_instance = NULL, owner_epoch = owner_epoch + 1,
		last_sequence = ? WHERE request_id = ?`, status, code, ts(now), doneSeq, t.RequestID); err != nil {
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
	if err := promoteWaiting(ctx, tx, t.ConversationID, now); err != nil {
		return nil, err
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
		switch {
		case cur.Waiting():
			// It ends, cancelled and never run, when its place comes.
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?
				WHERE request_id = ? AND cancel_requested_at IS NULL`, ts(p.Now), p.RequestID); err != nil {
				return fmt.Errorf("cancel turn: %w", err)
			}
			if c, err := getConversation(ctx, tx, cur.ConversationID); err == nil && c.ActiveRequestID != nil {
				tx.control(store.TurnKey(*c.ActiveRequestID)) // its owner looks again: the line changed
			}
		case cur.Status == store.TurnQueued:
			if frames, err = finishTurn(ctx, tx, cur, store.TurnCancelled, nil, p.Now); err != nil {
				return err
			}
			tx.touch(cur.ConversationID)
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET cancel_requested_at = ?, cancel_requested_by = ? WHERE request_id = ?`,
				ts(p.Now), nullIfEmpty(p.By), p.RequestID); err != nil {
				return fmt.Errorf("cancel turn: %w", err)
			}
		case cur.Status == store.TurnRunning, cur.Status == store.TurnAwaitingConfirmation:
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
	// A turn that never started and that no process held stays, to be
	// claimed and run: one waiting behind another (ending the turn ahead
	// makes it the active one), or made active by such an ending.
	ids, err := collect(ctx, s.w, "recover turns", scanString, `SELECT request_id FROM studio_operator_turns
		WHERE status = 'running' OR (status = 'queued' AND queue_order IS NULL AND owner_instance IS NOT NULL) ORDER BY created_at`)
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
