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

const effectCols = `id, conversation_id, request_id, effect_type, effect_json, status, emitted_at,
	expires_at, acknowledged_at, rejection_code, client_route`

func scanEffect(row scanner) (store.Effect, error) {
	var e store.Effect
	var raw string
	var emitted, expires float64
	var acked sql.NullFloat64
	var code, route sql.NullString
	if err := row.Scan(&e.ID, &e.ConversationID, &e.RequestID, &e.Type, &raw, &e.Status, &emitted,
		&expires, &acked, &code, &route); err != nil {
		return e, err
	}
	if err := protocol.Unmarshal([]byte(raw), &e.Effect); err != nil {
		return e, fmt.Errorf("stored effect %s: %w", e.ID, err)
	}
	e.EmittedAt, e.ExpiresAt, e.AcknowledgedAt = fromTS(emitted), fromTS(expires), nullTS(acked)
	e.RejectionCode, e.ClientRoute = nullString(code), nullString(route)
	return e, nil
}

func getEffect(ctx context.Context, q querier, id string) (store.Effect, error) {
	return loadEffect(ctx, q, id, "")
}

func loadEffect(ctx context.Context, q querier, id, lock string) (store.Effect, error) {
	e, err := scanEffect(q.QueryRowContext(ctx, `SELECT `+effectCols+` FROM studio_operator_effects WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, notFound("effect", id)
	}
	if err != nil {
		return e, fmt.Errorf("get effect: %w", err)
	}
	return e, nil
}

// EmitEffect implements store.EffectStore.
func (s *Store) EmitEffect(ctx context.Context, p store.EmitEffectParams) (store.Effect, store.Frame, error) {
	defer s.timed("emit_effect", time.Now())
	var e store.Effect
	var f store.Frame
	err := s.txn(ctx, func(tx *writeTx) error {
		c, err := lockConversation(ctx, tx, p.ConversationID)
		if err != nil {
			return err
		}
		if c.ActiveRequestID == nil || *c.ActiveRequestID != p.RequestID {
			return protocol.Errorf(protocol.Conflict, "request %s is not the conversation's active turn", p.RequestID)
		}
		if err := p.Effect.Validate(); err != nil {
			return err
		}
		raw, err := protocol.Marshal(p.Effect)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_effects
			(id, conversation_id, request_id, effect_type, effect_json, status, emitted_at, expires_at)
			VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`,
			p.ID, p.ConversationID, p.RequestID, p.Effect.Kind, string(raw), ts(p.Now), ts(p.ExpiresAt)); err != nil {
			return fmt.Errorf("insert effect: %w", err)
		}
		frames, err := appendFrames(ctx, tx, p.ConversationID, p.RequestID, p.Now,
			protocol.UICommandPayload{EffectID: p.ID, Effect: p.Effect, ExpiresAt: ts(p.ExpiresAt)})
		if err != nil {
			return err
		}
		f = frames[0]
		tx.touch(p.ConversationID)
		e, err = getEffect(ctx, tx, p.ID)
		return err
	})
	return e, f, err
}

// GetEffect implements store.EffectStore.
func (s *Store) GetEffect(ctx context.Context, id string) (store.Effect, error) {
	defer s.timed("get_effect", time.Now())
	return getEffect(ctx, s.r, id)
}

// AckEffect implements store.EffectStore.
func (s *Store) AckEffect(ctx context.Context, p store.AckEffectParams) (store.Effect, error) {
	defer s.timed("ack_effect", time.Now())
	switch p.Status {
	case store.EffectApplied, store.EffectRejected, store.EffectExpired:
	default:
		return store.Effect{}, protocol.Errorf(protocol.Validation, "ack effect: %q is not applied, rejected or expired", p.Status)
	}
	var e store.Effect
	err := s.txn(ctx, func(tx *writeTx) error {
		// Acknowledgements of one effect take turns: the second sees the first.
		cur, err := loadEffect(ctx, tx, p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if cur.Status != store.EffectPending {
			e = cur
			return ackRepeat(cur, p)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_effects
			SET status = ?, acknowledged_at = ?, rejection_code = ?, client_route = ?
			WHERE id = ? AND status = 'pending'`,
			p.Status, ts(p.Now), p.RejectionCode, p.ClientRoute, p.ID); err != nil {
			return fmt.Errorf("ack effect: %w", err)
		}
		if p.Audit != nil {
			if _, err := appendAdminEvent(ctx, tx, *p.Audit); err != nil {
				return err
			}
		}
		e, err = getEffect(ctx, tx, p.ID)
		return err
	})
	return e, err
}

// ackRepeat answers an acknowledgement of an effect that is no longer pending.
func ackRepeat(cur store.Effect, p store.AckEffectParams) error {
	if cur.Status == store.EffectExpired {
		if p.Status == store.EffectExpired {
			return nil
		}
		return protocol.Errorf(protocol.StaleContext, "effect %s expired", cur.ID).With("status", string(cur.Status))
	}
	same := cur.Status == p.Status && eqPtr(cur.ClientRoute, p.ClientRoute) && eqPtr(cur.RejectionCode, p.RejectionCode)
	if !same {
		return protocol.Errorf(protocol.Conflict, "effect %s was already acknowledged %s", cur.ID, cur.Status).With("status", string(cur.Status))
	}
	return nil
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
