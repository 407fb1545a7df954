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

// Webhooks and the outbox of their deliveries (store.WebhookStore). The
// deliveries are written by the state changes themselves (outbox.go);
// here a dispatcher claims them, like runs: SKIP LOCKED where rows are
// locked, an owner instance and an epoch, and a claim that expires so a
// dead daemon's deliveries are taken by another.

const webhookCols = `id, url, events, format, secret, created_at, created_by, disabled_at`

func scanWebhook(row scanner) (store.Webhook, error) {
	var w store.Webhook
	var events string
	var created float64
	var disabled sql.NullFloat64
	if err := row.Scan(&w.ID, &w.URL, &events, &w.Format, &w.Secret, &created, &w.CreatedBy, &disabled); err != nil {
		return w, err
	}
	w.Events = splitEvents(events)
	w.CreatedAt, w.DisabledAt = fromTS(created), nullTS(disabled)
	return w, nil
}

// joinEvents is the events column: ",a,b," (one LIKE finds a subscriber).
func joinEvents(events []string) string { return "," + strings.Join(events, ",") + "," }

func splitEvents(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

const deliveryCols = `id, webhook_id, event_type, payload, status, attempts, next_attempt_at, last_status, last_error,
	created_at, delivered_at, claimed_by, claim_expires_at, claim_epoch`

func scanDelivery(row scanner) (store.Delivery, error) {
	var d store.Delivery
	var payload string
	var lastErr, claimedBy sql.NullString
	var next, created float64
	var delivered, claimExp sql.NullFloat64
	if err := row.Scan(&d.ID, &d.WebhookID, &d.Event, &payload, &d.Status, &d.Attempts, &next, &d.LastStatus, &lastErr,
		&created, &delivered, &claimedBy, &claimExp, &d.ClaimEpoch); err != nil {
		return d, err
	}
	d.Payload = []byte(payload)
	d.LastError, d.ClaimedBy = lastErr.String, claimedBy.String
	d.NextAttemptAt, d.CreatedAt = fromTS(next), fromTS(created)
	d.DeliveredAt, d.ClaimExpiresAt = nullTS(delivered), nullTS(claimExp)
	return d, nil
}

func loadWebhook(ctx context.Context, q querier, id, lock string) (store.Webhook, error) {
	w, err := scanWebhook(q.QueryRowContext(ctx, `SELECT `+webhookCols+` FROM studio_webhooks WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return w, notFound("webhook", id)
	}
	if err != nil {
		return w, fmt.Errorf("get webhook: %w", err)
	}
	return w, nil
}

func loadDelivery(ctx context.Context, q querier, id, lock string) (store.Delivery, error) {
	d, err := scanDelivery(q.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM studio_webhook_deliveries WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, notFound("delivery", id)
	}
	if err != nil {
		return d, fmt.Errorf("get delivery: %w", err)
	}
	return d, nil
}

// CreateWebhook implements store.WebhookStore.
func (s *Store) CreateWebhook(ctx context.Context, p store.CreateWebhookParams) (store.Webhook, error) {
	defer s.timed("create_webhook", time.Now())
	if len(p.Events) == 0 {
		return store.Webhook{}, protocol.Errorf(protocol.Validation, "a webhook needs at least one event of %v", store.WebhookEvents).With("field", "events")
	}
	for _, e := range p.Events {
		if !store.ValidWebhookEvent(e) {
			return store.Webhook{}, protocol.Errorf(protocol.Validation, "unknown event %q: use %v", e, store.WebhookEvents).With("field", "events")
		}
	}
	if p.Format != store.FormatStandard && p.Format != store.FormatSlack {
		return store.Webhook{}, protocol.Errorf(protocol.Validation, "unknown format %q: use standard or slack", p.Format).With("field", "format")
	}
	var out store.Webhook
	err := s.txn(ctx, func(tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_webhooks (id, url, events, format, secret, created_at, created_by)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, p.ID, p.URL, joinEvents(p.Events), string(p.Format), p.Secret, ts(p.Now), p.CreatedBy); err != nil {
			return fmt.Errorf("create webhook: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		var err error
		out, err = loadWebhook(ctx, tx, p.ID, "")
		return err
	})
	return out, err
}

// GetWebhook implements store.WebhookStore.
func (s *Store) GetWebhook(ctx context.Context, id string) (store.Webhook, error) {
	defer s.timed("get_webhook", time.Now())
	return loadWebhook(ctx, s.r, id, "")
}

// ListWebhooks implements store.WebhookStore.
func (s *Store) ListWebhooks(ctx context.Context) ([]store.Webhook, error) {
	defer s.timed("list_webhooks", time.Now())
	return collect(ctx, s.r, "list webhooks", scanWebhook, `SELECT `+webhookCols+` FROM studio_webhooks
		WHERE disabled_at IS NULL ORDER BY created_at, id`)
}

// RemoveWebhook implements store.WebhookStore.
func (s *Store) RemoveWebhook(ctx context.Context, p store.RemoveWebhookParams) (store.Webhook, error) {
	defer s.timed("remove_webhook", time.Now())
	var out store.Webhook
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadWebhook(ctx, tx, p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if cur.DisabledAt != nil {
			return notFound("webhook", p.ID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_webhooks SET disabled_at = ? WHERE id = ?`, ts(p.Now), cur.ID); err != nil {
			return fmt.Errorf("remove webhook: %w", err)
		}
		// Its queued events go nowhere now; a dispatcher holding one finds
		// its claim gone (conflict) and drops it.
		if _, err := tx.ExecContext(ctx, `UPDATE studio_webhook_deliveries SET status = 'failed', last_error = ?,
			claimed_by = NULL, claim_expires_at = NULL, claim_epoch = claim_epoch + 1
			WHERE webhook_id = ? AND status = 'pending'`, "the webhook was removed", cur.ID); err != nil {
			return fmt.Errorf("remove webhook: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = loadWebhook(ctx, tx, cur.ID, "")
		return err
	})
	return out, err
}

// ListDeliveries implements store.WebhookStore.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]store.Delivery, error) {
	defer s.timed("list_deliveries", time.Now())
	if _, err := loadWebhook(ctx, s.r, p.WebhookID, ""); err != nil {
		return nil, err
	}
	return collect(ctx, s.r, "list deliveries", scanDelivery, `SELECT `+deliveryCols+` FROM studio_webhook_deliveries
		WHERE webhook_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, p.WebhookID, limitOr(p.Limit, 100))
}

// GetDelivery implements store.WebhookStore.
func (s *Store) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	defer s.timed("get_delivery", time.Now())
	return loadDelivery(ctx, s.r, id, "")
}

// ClaimDeliveries implements store.WebhookStore.
func (s *Store) ClaimDeliveries(ctx context.Context, p store.ClaimDeliveriesParams) ([]store.ClaimedDelivery, error) {
	defer s.timed("claim_deliveries", time.Now())
	var out []store.ClaimedDelivery
	err := s.txn(ctx, func(tx *writeTx) error {
		out = out[:0]
		now := ts(p.Now)
		// SKIP LOCKED, where rows are locked: rows another claimer holds
		// are passed over, so concurrent dispatchers take different ones.
		ids, err := collect(ctx, tx.conn, "claim deliveries", scanString, `SELECT id FROM studio_webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= ? AND (claim_expires_at IS NULL OR claim_expires_at <= ?)
			ORDER BY next_attempt_at, id LIMIT ?`+tx.locks.skipLocked, now, now, limitOr(p.Limit, 1))
		if err != nil {
			return err
		}
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, `UPDATE studio_webhook_deliveries SET claimed_by = ?, claim_expires_at = ?, claim_epoch = claim_epoch + 1
				WHERE id = ? AND status = 'pending'`, p.Instance, ts(p.Now.Add(p.Lease)), id)
			if err != nil {
				return fmt.Errorf("claim delivery: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				continue
			}
			var c store.ClaimedDelivery
			if c.Delivery, err = loadDelivery(ctx, tx, id, ""); err != nil {
				return err
			}
			var disabled sql.NullFloat64
			if err := tx.QueryRowContext(ctx, `SELECT url, format, secret, disabled_at FROM studio_webhooks WHERE id = ?`, c.WebhookID).
				Scan(&c.URL, &c.Format, &c.Secret, &disabled); err != nil {
				return fmt.Errorf("claim delivery: %w", err)
			}
			if disabled.Valid {
				// Queued by a change that committed while its webhook was
				// being removed: it goes nowhere.
				if _, err := tx.ExecContext(ctx, `UPDATE studio_webhook_deliveries SET status = 'failed', last_error = ?,
					claimed_by = NULL, claim_expires_at = NULL WHERE id = ?`, "the webhook was removed", id); err != nil {
					return fmt.Errorf("claim delivery: %w", err)
				}
				continue
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// RecordDeliveryAttempt implements store.WebhookStore.
func (s *Store) RecordDeliveryAttempt(ctx context.Context, p store.RecordDeliveryAttemptParams) (store.Delivery, error) {
	defer s.timed("record_delivery_attempt", time.Now())
	var delivered, next any
	switch p.Status {
	case store.DeliveryDelivered:
		delivered = ts(p.Now)
		next = ts(p.Now)
	case store.DeliveryPending:
		next = ts(p.NextAttemptAt)
	case store.DeliveryFailed:
		next = ts(p.Now)
	default:
		return store.Delivery{}, protocol.Errorf(protocol.Validation, "record delivery attempt: unknown status %q", p.Status)
	}
	var out store.Delivery
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_webhook_deliveries SET status = ?, attempts = attempts + 1, last_status = ?, last_error = ?,
			next_attempt_at = ?, delivered_at = ?, claimed_by = NULL, claim_expires_at = NULL
			WHERE id = ? AND status = 'pending' AND claimed_by = ? AND claim_epoch = ?`,
			string(p.Status), p.HTTPStatus, emptyNull(p.Error), next, delivered, p.ID, p.Instance, p.Epoch)
		if err != nil {
			return fmt.Errorf("record delivery attempt: %w", err)
		}
		out, err = loadDelivery(ctx, tx, p.ID, "")
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return protocol.Errorf(protocol.Conflict, "delivery %s is no longer claimed by %s (epoch %d)", p.ID, p.Instance, p.Epoch).
				With("status", string(out.Status))
		}
		return nil
	})
	return out, err
}

// OldestDueDelivery implements store.WebhookStore.
func (s *Store) OldestDueDelivery(ctx context.Context, now time.Time) (*time.Time, error) {
	var oldest sql.NullFloat64
	if err := s.r.QueryRowContext(ctx, `SELECT MIN(created_at) FROM studio_webhook_deliveries
		WHERE status = 'pending' AND next_attempt_at <= ?`, ts(now)).Scan(&oldest); err != nil {
		return nil, fmt.Errorf("oldest due delivery: %w", err)
	}
	return nullTS(oldest), nil
}
