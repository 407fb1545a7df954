package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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
	return s.purgeConversations(ctx, `status = 'deleted' AND deleted_at < ?`, ts(p.DeletedBefore), p.Audit)
}

// idleConversations selects what retention removes: not used since the
// cutoff, not pinned, not deleted, no active turn.
const idleConversations = `status <> 'deleted' AND pinned = 0 AND active_request_id IS NULL AND updated_at < ?`

// PurgeIdleConversations implements store.RetentionStore.
func (s *Store) PurgeIdleConversations(ctx context.Context, p store.PurgeIdleConversationsParams) (store.PurgeDeletedConversationsResult, error) {
	defer s.timed("purge_idle_conversations", time.Now())
	return s.purgeConversations(ctx, idleConversations, ts(p.UnusedBefore), p.Audit)
}

// CountIdleConversations implements store.RetentionStore.
func (s *Store) CountIdleConversations(ctx context.Context, unusedBefore time.Time) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, s.d.Rebind(`SELECT COUNT(*) FROM studio_operator_conversations WHERE `+idleConversations),
		ts(unusedBefore)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count idle conversations: %w", err)
	}
	return n, nil
}

// purgeConversations removes the conversations matching where (one
// placeholder, arg) with every dependent row, and the audit row, in one
// transaction; their streams in this process end with replay_gap.
func (s *Store) purgeConversations(ctx context.Context, where string, arg any, auditRow *store.AppendAdminEventParams) (store.PurgeDeletedConversationsResult, error) {
	var out store.PurgeDeletedConversationsResult
	err := s.txn(ctx, func(tx *writeTx) error {
		out = store.PurgeDeletedConversationsResult{}
		doomed := `(SELECT id FROM studio_operator_conversations WHERE ` + where + `)`
		// Locked (PostgreSQL): a turn another daemon submits to one of
		// them waits for this purge, and the rows chosen stay chosen for
		// every DELETE below.
		ids, err := collect(ctx, tx.conn, "purge conversations", scanString,
			`SELECT id FROM studio_operator_conversations WHERE `+where+` ORDER BY id`+tx.locks.update, arg)
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
			res, err := tx.ExecContext(ctx, `DELETE FROM `+step.table+` WHERE conversation_id IN `+doomed, arg)
			if err != nil {
				return fmt.Errorf("purge %s: %w", step.table, err)
			}
			*step.n, _ = res.RowsAffected()
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_conversations WHERE id IN `+doomed, arg)
		if err != nil {
			return fmt.Errorf("purge conversations: %w", err)
		}
		out.Conversations, _ = res.RowsAffected()
		for _, id := range ids {
			tx.touch(id)
			tx.removed = append(tx.removed, id)
		}
		out.IDs = ids
		if auditRow == nil {
			return nil
		}
		row := *auditRow
		if row.Details, err = purgedDetails(row.Details, out); err != nil {
			return err
		}
		return audit(ctx, tx, &row)
	})
	return out, err
}

// maxAuditedIDs bounds the conversation ids one purge's audit row lists;
// the counts are always whole.
const maxAuditedIDs = 1000

// purgedDetails adds what a purge removed to its audit row's details (a
// JSON object, or none): the counts under "removed" and the conversations'
// ids under "conversation_ids", at most maxAuditedIDs of them
// ("conversation_ids_truncated" then says so).
func purgedDetails(details jsontext.Value, out store.PurgeDeletedConversationsResult) (jsontext.Value, error) {
	m := map[string]jsontext.Value{}
	if len(details) > 0 {
		if err := json.Unmarshal(details, &m); err != nil {
			return nil, fmt.Errorf("purge audit details: %w", err)
		}
	}
	ids := out.IDs
	if len(ids) > maxAuditedIDs {
		ids = ids[:maxAuditedIDs]
		m["conversation_ids_truncated"] = jsontext.Value("true")
	}
	extra := map[string]any{
		"removed": map[string]int64{"conversations": out.Conversations, "turns": out.Turns, "frames": out.Frames,
			"proposals": out.Proposals, "effects": out.Effects, "tickets": out.Tickets},
		"conversation_ids": append([]string{}, ids...),
	}
	for k, v := range extra {
		b, err := json.Marshal(v, json.Deterministic(true))
		if err != nil {
			return nil, fmt.Errorf("purge audit details: %w", err)
		}
		m[k] = b
	}
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("purge audit details: %w", err)
	}
	return b, nil
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
	rows, err := tx.QueryContext(ctx, `SELECT id, conversation_id, request_id, command_type, summary, created_at, confirmed_at, executed_at
		FROM studio_operator_proposals WHERE status = 'executing' ORDER BY created_at, id LIMIT ?`, limitOr(p.ProposalLimit, 20))
	if err != nil {
		return d, fmt.Errorf("diagnostics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e store.ExecutingProposal
		var created float64
		var confirmed, executed sql.NullFloat64
		if err := rows.Scan(&e.ID, &e.ConversationID, &e.RequestID, &e.CommandType, &e.Summary, &created, &confirmed, &executed); err != nil {
			return d, fmt.Errorf("diagnostics: %w", err)
		}
		e.CreatedAt, e.ConfirmedAt, e.ExecutedAt = fromTS(created), nullTS(confirmed), nullTS(executed)
		d.ExecutingProposals = append(d.ExecutingProposals, e)
	}
	return d, rows.Err()
}
