package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// AppendAdminEvent implements store.AuditStore.
func (s *Store) AppendAdminEvent(ctx context.Context, p store.AppendAdminEventParams) (store.AdminEvent, error) {
	defer s.timed("append_admin_event", time.Now())
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
	// Details quote what people and models sent (a webhook's URL, a
	// command's fields): the trail keeps no secret of theirs.
	details = redact.SecretsJSON(details)
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO admin_events (created_at, actor, action, target_id, details)
		VALUES (?, ?, ?, ?, ?) RETURNING id`, ts(p.Now), p.Actor, p.Action, p.TargetID, string(details)).Scan(&id); err != nil {
		return store.AdminEvent{}, fmt.Errorf("append admin event: %w", err)
	}
	tx.audited = append(tx.audited, id)
	tx.changed(store.ChangeAuditAppended, strconv.FormatInt(id, 10))
	return store.AdminEvent{ID: id, CreatedAt: protocol.Time(ts(p.Now)), Actor: p.Actor, Action: p.Action,
		TargetID: p.TargetID, Details: details}, nil
}

// ListAdminEvents implements store.AuditStore.
func (s *Store) ListAdminEvents(ctx context.Context, p store.ListAdminEventsParams) ([]store.AdminEvent, error) {
	defer s.timed("list_admin_events", time.Now())
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
	cond, cargs := auditFilter(p)
	query += cond
	args = append(args, cargs...)
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limitOr(p.Limit, 50))
	return collect(ctx, s.r, "list admin events", scanAdminEvent, query, args...)
}

// ListAuditActors implements store.AuditStore. It skips through the actor
// index (one lookup per distinct actor), not over every row.
func (s *Store) ListAuditActors(ctx context.Context, limit int) ([]string, error) {
	defer s.timed("list_audit_actors", time.Now())
	return collect(ctx, s.r, "list audit actors", func(row scanner) (string, error) {
		var a string
		return a, row.Scan(&a)
	}, `WITH RECURSIVE actors(name) AS (
			SELECT MIN(actor) FROM admin_events
			UNION ALL
			SELECT (SELECT MIN(actor) FROM admin_events WHERE actor > actors.name) FROM actors WHERE actors.name IS NOT NULL)
		SELECT name FROM actors WHERE name IS NOT NULL LIMIT ?`, limitOr(limit, 200))
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
