package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExpireEffects implements store.EffectStore.
func (s *Store) ExpireEffects(ctx context.Context, p store.ExpireEffectsParams) (int64, error) {
	defer s.timed("expire_effects", time.Now())
	var n int64
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_effects SET status = 'expired', acknowledged_at = ?
			WHERE status = 'pending' AND expires_at <= ?`, ts(p.Now), ts(p.Now))
		if err != nil {
			return fmt.Errorf("expire effects: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// expireEffectsOf marks a conversation's pending effects expired, inside
// the caller's transaction: a newer turn supersedes them, and an archived
// or deleted conversation applies none (docs/design.md §8).
func expireEffectsOf(ctx context.Context, tx *writeTx, convID string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_effects SET status = 'expired', acknowledged_at = ?
		WHERE conversation_id = ? AND status = 'pending'`, ts(now), convID); err != nil {
		return fmt.Errorf("expire effects: %w", err)
	}
	return nil
}

// archivedTitle refuses renaming an archived conversation unless the same
// request unarchives it: archived is read-only (docs/design.md §3).
func archivedTitle(cur store.Conversation, p store.UpdateConversationParams) error {
	if cur.Status == store.ConversationArchived && p.Title != nil && (p.Status == nil || *p.Status != store.ConversationActive) {
		return protocol.Errorf(protocol.Conflict, "conversation is archived and read-only; unarchive it to rename it").
			With("status", string(cur.Status))
	}
	return nil
}
