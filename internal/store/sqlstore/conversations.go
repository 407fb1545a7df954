package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

const conversationCols = `id, project, title, status, next_sequence, active_request_id,
	created_at, updated_at, archived_at, deleted_at, retained_from_sequence,
	pinned, model, forked_from_id, forked_from_sequence, forked_through, owner, visibility`

func scanConversation(row scanner) (store.Conversation, error) {
	var c store.Conversation
	var project, title, active, model, forkedFrom sql.NullString
	var created, updated float64
	var archived, deleted sql.NullFloat64
	var forkedSeq, forkedThrough sql.NullInt64
	var pinned int
	err := row.Scan(&c.ID, &project, &title, &c.Status, &c.NextSequence, &active,
		&created, &updated, &archived, &deleted, &c.RetainedFrom,
		&pinned, &model, &forkedFrom, &forkedSeq, &forkedThrough, &c.Owner, &c.Visibility)
	if err != nil {
		return c, err
	}
	c.Project, c.Title, c.ActiveRequestID = nullString(project), nullString(title), nullString(active)
	c.Pinned, c.Model = pinned == 1, nullString(model)
	if forkedFrom.Valid {
		c.ForkedFrom = &store.ForkOrigin{ConversationID: forkedFrom.String, Sequence: forkedSeq.Int64, CopiedThrough: forkedThrough.Int64}
	}
	c.CreatedAt, c.UpdatedAt = fromTS(created), fromTS(updated)
	c.ArchivedAt, c.DeletedAt = nullTS(archived), nullTS(deleted)
	return c, nil
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
	defer s.timed("create_conversation", time.Now())
	var c store.Conversation
	err := s.txn(ctx, func(tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_conversations
			(id, project, title, status, next_sequence, created_at, updated_at, owner, visibility)
			VALUES (?, ?, ?, 'active', 1, ?, ?, ?, ?)`, p.ID, p.Project, p.Title, ts(p.Now), ts(p.Now),
			ownerOr(p.Owner), visibilityOr(p.Visibility))
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
	defer s.timed("get_conversation", time.Now())
	return getConversation(ctx, s.r, id)
}

// ListConversations implements store.ConversationStore: pinned first,
// then newest first.
func (s *Store) ListConversations(ctx context.Context, p store.ListConversationsParams) ([]store.Conversation, error) {
	defer s.timed("list_conversations", time.Now())
	query := `SELECT ` + conversationCols + ` FROM studio_operator_conversations WHERE `
	var args []any
	if p.Status == "" {
		query += `status IN ('active', 'archived')`
	} else {
		query += `status = ?`
		args = append(args, p.Status)
	}
	if p.DeletedAfter != nil {
		query += ` AND deleted_at >= ?`
		args = append(args, ts(*p.DeletedAfter))
	}
	if len(p.Terms) > 0 {
		query += ` AND id IN (` + s.d.SearchMatch() + `)`
		args = append(args, s.d.SearchQuery(p.Terms))
	}
	if p.VisibleTo != "" {
		query += ` AND (visibility = 'team' OR owner = ?)`
		args = append(args, p.VisibleTo)
	}
	if p.AfterCreated != nil {
		pinned := boolInt(p.AfterPinned)
		query += ` AND (pinned < ? OR (pinned = ? AND (created_at < ? OR (created_at = ? AND id < ?))))`
		args = append(args, pinned, pinned, ts(*p.AfterCreated), ts(*p.AfterCreated), p.AfterID)
	}
	query += ` ORDER BY pinned DESC, created_at DESC, id DESC LIMIT ?`
	args = append(args, limitOr(p.Limit, 50))
	return collect(ctx, s.r, "list conversations", scanConversation, query, args...)
}

// UpdateConversation implements store.ConversationStore.
func (s *Store) UpdateConversation(ctx context.Context, p store.UpdateConversationParams) (store.Conversation, error) {
	defer s.timed("update_conversation", time.Now())
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
		if err := updateSettings(ctx, tx, cur, p); err != nil {
			return err
		}
		if p.Visibility != nil {
			if _, err := protocol.ParseVisibility(*p.Visibility); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_conversations SET visibility = ?, updated_at = ? WHERE id = ?`,
				*p.Visibility, ts(p.Now), p.ID); err != nil {
				return fmt.Errorf("set conversation visibility: %w", err)
			}
			if *p.Visibility != cur.Visibility {
				tx.control(store.AccessChanged)
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
	defer s.timed("delete_conversation", time.Now())
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

// ownerOr is a conversation's owner: the creating principal, or the
// bootstrap owner for a conversation created without one.
func ownerOr(name string) string {
	if name == "" {
		return protocol.OwnerPrincipal
	}
	return name
}

// visibilityOr is a new conversation's visibility: team unless asked.
func visibilityOr(v string) string {
	if v == "" {
		return protocol.VisibilityTeam
	}
	return v
}
