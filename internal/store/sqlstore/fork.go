package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// updateSettings applies the pinned and model changes of an update, in
// its transaction. An archived conversation is read-only: its model
// changes only with the request that unarchives it (like its title);
// pinning is filing, allowed whatever the status.
func updateSettings(ctx context.Context, tx *writeTx, cur store.Conversation, p store.UpdateConversationParams) error {
	if p.Pinned != nil {
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET pinned = ?, updated_at = ? WHERE id = ?`,
			boolInt(*p.Pinned), ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("pin conversation: %w", err)
		}
	}
	if p.Model != nil {
		if cur.Status == store.ConversationArchived && (p.Status == nil || *p.Status != store.ConversationActive) {
			return protocol.Errorf(protocol.Conflict, "conversation is archived and read-only; unarchive it to change its model").
				With("status", string(cur.Status))
		}
		var model any
		if *p.Model != "" {
			model = *p.Model
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET model = ?, updated_at = ? WHERE id = ?`,
			model, ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("set conversation model: %w", err)
		}
	}
	return nil
}

// RestoreConversation implements store.ConversationStore.
func (s *Store) RestoreConversation(ctx context.Context, p store.RestoreConversationParams) (store.Conversation, error) {
	defer s.timed("restore_conversation", time.Now())
	var c store.Conversation
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockConversation(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if cur.Status != store.ConversationDeleted {
			return protocol.Errorf(protocol.Conflict, "conversation %s is %s, not deleted; there is nothing to restore", p.ID, cur.Status).
				With("status", string(cur.Status))
		}
		if cur.DeletedAt == nil || cur.DeletedAt.Before(p.DeletedAfter) {
			return protocol.Errorf(protocol.NotFound, "conversation %s was deleted before the recovery window and can no longer be restored", p.ID)
		}
		status := store.ConversationActive
		if cur.ArchivedAt != nil {
			status = store.ConversationArchived
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET status = ?, deleted_at = NULL, updated_at = ? WHERE id = ?`,
			string(status), ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("restore conversation: %w", err)
		}
		audit := p.Audit
		audit.Now = p.Now
		if _, err := appendAdminEvent(ctx, tx, audit); err != nil {
			return err
		}
		tx.touch(p.ID)
		c, err = getConversation(ctx, tx, p.ID)
		return err
	})
	return c, err
}

// forkPage is how many turns a fork maps per statement.
const forkPage = 500

// ForkConversation implements store.ConversationStore. Three statements
// do the copying, whatever the length: the fork's turns (from a mapping
// written a page of ids at a time), its frames and its search documents
// (the copied turns' text is the source's), each INSERT ... SELECT inside
// the database.
func (s *Store) ForkConversation(ctx context.Context, p store.ForkConversationParams) (store.Conversation, error) {
	defer s.timed("fork_conversation", time.Now())
	var c store.Conversation
	err := s.txn(ctx, func(tx *writeTx) error {
		src, err := lockConversation(ctx, tx, p.SourceID)
		if err != nil {
			return err
		}
		if src.Status == store.ConversationDeleted {
			return notFound("conversation", p.SourceID)
		}
		start, upTo, err := forkRange(ctx, tx, src, p.UpToSequence)
		if err != nil {
			return err
		}
		copied := max(upTo-start+1, 0)
		title := p.Title
		if title == nil {
			title = src.Title
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_conversations
			(id, project, title, status, next_sequence, created_at, updated_at, model, forked_from_id, forked_from_sequence, forked_through,
			 owner, visibility)
			VALUES (?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, src.Project, title, copied+1, ts(p.Now), ts(p.Now), src.Model, src.ID, upTo, copied,
			ownerOr(p.Owner), src.Visibility); err != nil {
			return fmt.Errorf("create fork: %w", err)
		}
		if upTo >= start {
			if err := copyTurns(ctx, tx, p, start, upTo); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_frames
				(conversation_id, sequence, request_id, frame_type, payload_json, created_at)
				SELECT ?, f.sequence - ?, m.request_id, f.frame_type,
				       CASE WHEN f.frame_type = 'done'
				            THEN `+tx.d.JSON(`'{"outcome":"' || t.status || '","lastSequence":' || CAST(f.sequence - ? AS TEXT) || '}'`)+`
				            ELSE f.payload_json END,
				       f.created_at
				FROM studio_operator_frames f
				JOIN studio_operator_fork_turns m ON m.conversation_id = ? AND m.source_request_id = f.request_id
				JOIN studio_operator_turns t ON t.request_id = f.request_id
				WHERE f.conversation_id = ? AND f.sequence >= ? AND f.sequence <= ?
				ORDER BY f.sequence`,
				p.ID, start-1, start-1, p.ID, src.ID, start, upTo); err != nil {
				return fmt.Errorf("copy frames: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
				SELECT m.conversation_id, m.request_id, d.content
				FROM studio_operator_fork_turns m
				JOIN studio_operator_search_docs d ON d.conversation_id = ? AND d.request_id = m.source_request_id
				WHERE m.conversation_id = ?`, src.ID, p.ID); err != nil {
				return fmt.Errorf("copy search documents: %w", err)
			}
		}
		tx.touch(p.ID)
		c, err = getConversation(ctx, tx, p.ID)
		return err
	})
	return c, err
}

// forkRange is the source's frames a fork copies: from the first turn that
// starts within the retained frames to the done frame upTo (nil: the newest).
func forkRange(ctx context.Context, tx *writeTx, src store.Conversation, want *int64) (start, upTo int64, err error) {
	boundary := func(query string, args ...any) (int64, error) {
		var n sql.NullInt64
		if err := tx.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			return 0, fmt.Errorf("fork boundaries: %w", err)
		}
		return n.Int64, nil
	}
	const before = `SELECT MAX(sequence) FROM studio_operator_frames WHERE conversation_id = ? AND frame_type = 'done' AND sequence <= ?`
	const after = `SELECT MIN(sequence) FROM studio_operator_frames WHERE conversation_id = ? AND frame_type = 'done' AND sequence >= ?`
	if start, err = firstTurnStart(ctx, tx, src, after); err != nil {
		return 0, 0, err
	}
	if want == nil {
		upTo, err = boundary(before, src.ID, src.LastSequence())
		return start, upTo, err
	}
	upTo = *want
	if upTo == 0 {
		return start, 0, nil
	}
	prev, err := boundary(before, src.ID, upTo)
	if err != nil {
		return 0, 0, err
	}
	if prev == upTo && upTo >= start {
		return start, upTo, nil
	}
	next, err := boundary(after, src.ID, max(upTo+1, start))
	if err != nil {
		return 0, 0, err
	}
	if prev < start { // a turn whose start was purged is no boundary to copy to
		prev = 0
	}
	pe := protocol.Errorf(protocol.Validation, "upToSequence %d does not end a complete turn; fork at a done frame: %s", upTo, nearest(prev, next)).
		With("field", "upToSequence").With("nearestBefore", prev)
	if next > 0 {
		pe = pe.With("nearestAfter", next)
	}
	return 0, 0, pe
}

func nearest(prev, next int64) string {
	parts := []string{fmt.Sprintf("%d (before)", prev)}
	if next > 0 {
		parts = append(parts, fmt.Sprintf("%d (after)", next))
	}
	return strings.Join(parts, " or ")
}

// firstTurnStart is the sequence of the first turn's instruction among the
// retained frames: the first retained frame when it is one, else the frame
// after the first retained done (the turn cut by a purge is left out).
func firstTurnStart(ctx context.Context, tx *writeTx, src store.Conversation, after string) (int64, error) {
	if src.RetainedFrom <= 1 {
		return 1, nil
	}
	var typ string
	var payload string
	err := tx.QueryRowContext(ctx, `SELECT frame_type, payload_json FROM studio_operator_frames WHERE conversation_id = ? AND sequence = ?`,
		src.ID, src.RetainedFrom).Scan(&typ, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return src.RetainedFrom, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fork start: %w", err)
	}
	if typ == string(protocol.FrameText) {
		if pl, err := protocol.DecodePayload(protocol.FrameText, []byte(payload)); err == nil && pl.(protocol.TextPayload).Role == protocol.RoleUser {
			return src.RetainedFrom, nil
		}
	}
	var done sql.NullInt64
	if err := tx.QueryRowContext(ctx, after, src.ID, src.RetainedFrom).Scan(&done); err != nil {
		return 0, fmt.Errorf("fork start: %w", err)
	}
	if !done.Valid {
		return src.NextSequence, nil
	}
	return done.Int64 + 1, nil
}

// copyTurns gives the fork a turn of its own for each complete turn of the
// source in [start, upTo]: the mapping a page of ids at a time, then the
// turn rows in one statement.
func copyTurns(ctx context.Context, tx *writeTx, p store.ForkConversationParams, start, upTo int64) error {
	after := start - 1
	for {
		rows, err := tx.QueryContext(ctx, `SELECT request_id, sequence FROM studio_operator_frames
			WHERE conversation_id = ? AND frame_type = 'done' AND sequence > ? AND sequence <= ?
			ORDER BY sequence LIMIT ?`, p.SourceID, after, upTo, forkPage)
		if err != nil {
			return fmt.Errorf("fork turns: %w", err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id, &after); err != nil {
				rows.Close()
				return fmt.Errorf("fork turns: %w", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("fork turns: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("fork turns: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		args := make([]any, 0, 3*len(ids))
		for _, id := range ids {
			args = append(args, p.ID, p.NewRequestID(), id)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_fork_turns (conversation_id, request_id, source_request_id) VALUES (?, ?, ?)`+
			strings.Repeat(`, (?, ?, ?)`, len(ids)-1), args...); err != nil {
			return fmt.Errorf("fork turns: %w", err)
		}
		if len(ids) < forkPage {
			break
		}
	}
	// The fork's frames are the source's from start on, renumbered from 1.
	if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_turns
		(request_id, conversation_id, instruction, context_json, context_hash, status, error_code,
		 created_at, started_at, ended_at, cancel_requested_at, first_sequence, last_sequence)
		SELECT m.request_id, m.conversation_id, t.instruction, t.context_json, t.context_hash, t.status, t.error_code,
		       t.created_at, t.started_at, t.ended_at, t.cancel_requested_at, t.first_sequence - ?, t.last_sequence - ?
		FROM studio_operator_fork_turns m JOIN studio_operator_turns t ON t.request_id = m.source_request_id
		WHERE m.conversation_id = ?`, start-1, start-1, p.ID); err != nil {
		return fmt.Errorf("fork turns: %w", err)
	}
	return nil
}
