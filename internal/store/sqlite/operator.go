package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

const conversationCols = `id, project, title, status, next_sequence, active_request_id,
	created_at, updated_at, archived_at, deleted_at, retained_from_sequence`

type scanner interface{ Scan(dest ...any) error }

func scanConversation(row scanner) (store.Conversation, error) {
	var c store.Conversation
	var project, title, active sql.NullString
	var created, updated float64
	var archived, deleted sql.NullFloat64
	err := row.Scan(&c.ID, &project, &title, &c.Status, &c.NextSequence, &active,
		&created, &updated, &archived, &deleted, &c.RetainedFrom)
	if err != nil {
		return c, err
	}
	c.Project, c.Title, c.ActiveRequestID = nullString(project), nullString(title), nullString(active)
	c.CreatedAt, c.UpdatedAt = fromTS(created), fromTS(updated)
	c.ArchivedAt, c.DeletedAt = nullTS(archived), nullTS(deleted)
	return c, nil
}

func notFound(what, id string) error {
	return protocol.Errorf(protocol.NotFound, "%s %s not found", what, id)
}

func getConversation(ctx context.Context, q querier, id string) (store.Conversation, error) {
	c, err := scanConversation(q.QueryRowContext(ctx,
		`SELECT `+conversationCols+` FROM studio_operator_conversations WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, notFound("conversation", id)
	}
	if err != nil {
		return c, fmt.Errorf("get conversation: %w", err)
	}
	return c, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func appendAdminEvent(ctx context.Context, tx *sql.Tx, p store.AppendAdminEventParams) (store.AdminEvent, error) {
	details := p.Details
	if details == nil {
		details = jsontext.Value(`{}`)
	}
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO admin_events (created_at, actor, action, target_id, details)
		VALUES (?, ?, ?, ?, ?) RETURNING id`, ts(p.Now), p.Actor, p.Action, p.TargetID, string(details)).Scan(&id); err != nil {
		return store.AdminEvent{}, fmt.Errorf("append admin event: %w", err)
	}
	return store.AdminEvent{ID: id, CreatedAt: protocol.Time(ts(p.Now)), Actor: p.Actor, Action: p.Action,
		TargetID: p.TargetID, Details: details}, nil
}
