package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// PurgeFrames implements store.RetentionStore.
func (s *Store) PurgeFrames(ctx context.Context, p store.PurgeFramesParams) (store.PurgeFramesResult, error) {
	defer s.timed("purge_frames", time.Now())
	var out store.PurgeFramesResult
	err := s.txn(ctx, func(tx *writeTx) error {
		c, err := lockConversation(ctx, tx, p.ConversationID)
		if err != nil {
			return err
		}
		if p.BeforeSequence < 1 || p.BeforeSequence > c.NextSequence {
			return protocol.Errorf(protocol.Validation, "beforeSequence must be from 1 to %d (the next sequence)", c.NextSequence).
				With("field", "beforeSequence")
		}
		if c.ActiveRequestID != nil {
			return protocol.Errorf(protocol.Conflict, "conversation has an active turn; purge frames after it ends").
				With("activeRequestId", *c.ActiveRequestID)
		}
		out.RetainedFrom = c.RetainedFrom
		if p.BeforeSequence > c.RetainedFrom {
			res, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_frames WHERE conversation_id = ? AND sequence < ?`,
				p.ConversationID, p.BeforeSequence)
			if err != nil {
				return fmt.Errorf("purge frames: %w", err)
			}
			out.Purged, _ = res.RowsAffected()
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET retained_from_sequence = ?, updated_at = ?
				WHERE id = ?`, p.BeforeSequence, ts(p.Now), p.ConversationID); err != nil {
				return fmt.Errorf("purge frames: %w", err)
			}
			out.RetainedFrom = p.BeforeSequence
			tx.touch(p.ConversationID)
		}
		return audit(ctx, tx, p.Audit)
	})
	return out, err
}

// PurgeDeletedConversations implements store.RetentionStore.
func (s *Store) PurgeDeletedConversations(ctx context.Context, p store.PurgeDeletedConversationsParams) (store.PurgeDeletedConversationsResult, error) {
	defer s.timed("purge_deleted_conversations", time.Now())
	var out store.PurgeDeletedConversationsResult
	err := s.txn(ctx, func(tx *writeTx) error {
		const doomed = `(SELECT id FROM studio_operator_conversations WHERE status = 'deleted' AND deleted_at < ?)`
		cutoff := ts(p.DeletedBefore)
		ids, err := collect(ctx, tx.conn, "purge conversations", scanString, `SELECT id FROM studio_operator_conversations WHERE status = 'deleted' AND deleted_at < ?`, cutoff)
		if err != nil {
			return err
		}
		// Children before parents: the foreign keys are enforced.
		for _, step := range []struct {
			table string
			n     *int64
		}{
			{"studio_operator_effects", &out.Effects},
			{"studio_operator_proposals", &out.Proposals},
			{"studio_operator_frames", &out.Frames},
			{"studio_operator_stream_tickets", &out.Tickets},
			{"studio_operator_fork_turns", new(int64)},
			{"studio_operator_turns", &out.Turns},
		} {
			res, err := tx.ExecContext(ctx, `DELETE FROM `+step.table+` WHERE conversation_id IN `+doomed, cutoff)
			if err != nil {
				return fmt.Errorf("purge %s: %w", step.table, err)
			}
			*step.n, _ = res.RowsAffected()
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_conversations WHERE id IN `+doomed, cutoff)
		if err != nil {
			return fmt.Errorf("purge conversations: %w", err)
		}
		out.Conversations, _ = res.RowsAffected()
		for _, id := range ids {
			tx.touch(id)
		}
		return audit(ctx, tx, p.Audit)
	})
	return out, err
}

// Diagnostics implements store.AppStore.
func (s *Store) Diagnostics(ctx context.Context, p store.DiagnosticsParams) (store.Diagnostics, error) {
	defer s.timed("diagnostics", time.Now())
	var d store.Diagnostics
	tx, err := s.readTx(ctx)
	if err != nil {
		return d, fmt.Errorf("diagnostics: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []struct {
		sql string
		n   *int64
	}{
		{`SELECT COUNT(*) FROM studio_runs WHERE status = 'queued'`, &d.RunsQueued},
		{`SELECT COUNT(*) FROM studio_runs WHERE status = 'running'`, &d.RunsRunning},
		{`SELECT COUNT(*) FROM studio_operator_turns WHERE status = 'queued'`, &d.TurnsQueued},
		{`SELECT COUNT(*) FROM studio_operator_turns WHERE status = 'running'`, &d.TurnsRunning},
		{`SELECT COUNT(*) FROM studio_operator_turns WHERE status = 'awaiting_confirmation'`, &d.TurnsAwaiting},
		{`SELECT COUNT(*) FROM studio_schedules WHERE enabled = 1`, &d.EnabledSchedules},
		{`SELECT COUNT(*) FROM studio_operator_proposals WHERE status = 'executing'`, &d.ExecutingProposalsTotal},
	} {
		if err := tx.QueryRowContext(ctx, q.sql).Scan(q.n); err != nil {
			return d, fmt.Errorf("diagnostics: %w", err)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, conversation_id, request_id, command_type, summary, created_at, confirmed_at
		FROM studio_operator_proposals WHERE status = 'executing' ORDER BY created_at, id LIMIT ?`, limitOr(p.ProposalLimit, 20))
	if err != nil {
		return d, fmt.Errorf("diagnostics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e store.ExecutingProposal
		var created float64
		var confirmed sql.NullFloat64
		if err := rows.Scan(&e.ID, &e.ConversationID, &e.RequestID, &e.CommandType, &e.Summary, &created, &confirmed); err != nil {
			return d, fmt.Errorf("diagnostics: %w", err)
		}
		e.CreatedAt, e.ConfirmedAt = fromTS(created), nullTS(confirmed)
		d.ExecutingProposals = append(d.ExecutingProposals, e)
	}
	return d, rows.Err()
}
