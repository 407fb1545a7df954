package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

const playbookCols = `id, project, name, description, prompt, args_json, version, created_at, updated_at`

func scanPlaybook(row scanner) (store.Playbook, error) {
	var p store.Playbook
	var args string
	var created, updated float64
	if err := row.Scan(&p.ID, &p.Project, &p.Name, &p.Description, &p.Prompt, &args, &p.Version, &created, &updated); err != nil {
		return p, err
	}
	p.Args = []store.PlaybookArg{}
	if err := json.Unmarshal([]byte(args), &p.Args); err != nil {
		return p, fmt.Errorf("decode playbook args: %w", err)
	}
	p.CreatedAt, p.UpdatedAt = fromTS(created), fromTS(updated)
	return p, nil
}

func getPlaybook(ctx context.Context, q querier, where string, arg any) (store.Playbook, error) {
	return loadPlaybook(ctx, q, where, arg, "")
}

func loadPlaybook(ctx context.Context, q querier, where string, arg any, lock string) (store.Playbook, error) {
	p, err := scanPlaybook(q.QueryRowContext(ctx, `SELECT `+playbookCols+` FROM studio_playbooks WHERE `+where+` = ?`+lock, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound("playbook", fmt.Sprint(arg))
	}
	if err != nil {
		return p, fmt.Errorf("get playbook: %w", err)
	}
	return p, nil
}

// CreatePlaybook implements store.PlaybookStore.
func (s *Store) CreatePlaybook(ctx context.Context, p store.CreatePlaybookParams) (store.Playbook, error) {
	defer s.timed("create_playbook", time.Now())
	var out store.Playbook
	err := s.txn(ctx, func(tx *writeTx) error {
		if err := playbooks.nameFree(ctx, tx, p.Name); err != nil {
			return err
		}
		args, err := encodeJSON(argsOrEmpty(p.Args))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_playbooks
			(id, project, name, description, prompt, args_json, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			p.ID, p.Project, p.Name, p.Description, p.Prompt, args, ts(p.Now), ts(p.Now)); err != nil {
			return fmt.Errorf("create playbook: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		tx.changed(store.ChangePlaybookChanged, p.ID)
		out, err = getPlaybook(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// byNamePage completes a list query over a named resource: optional project
// and text filters (name or description), the name cursor, name order.
func byNamePage(selectFrom, project, text, afterName string, limit int) (string, []any) {
	query := selectFrom + ` WHERE 1 = 1`
	var args []any
	if project != "" {
		query += ` AND project = ?`
		args = append(args, project)
	}
	if text != "" {
		query += ` AND (lower(name) LIKE ? ESCAPE '\' OR lower(description) LIKE ? ESCAPE '\')`
		args = append(args, likePattern(text), likePattern(text))
	}
	if afterName != "" {
		query += ` AND name > ?`
		args = append(args, afterName)
	}
	query += ` ORDER BY name LIMIT ?`
	return query, append(args, limitOr(limit, 50))
}

func argsOrEmpty(a []store.PlaybookArg) []store.PlaybookArg {
	if a == nil {
		return []store.PlaybookArg{}
	}
	return a
}

// GetPlaybook implements store.PlaybookStore.
func (s *Store) GetPlaybook(ctx context.Context, id string) (store.Playbook, error) {
	defer s.timed("get_playbook", time.Now())
	return getPlaybook(ctx, s.r, "id", id)
}

// GetPlaybookByName implements store.PlaybookStore.
func (s *Store) GetPlaybookByName(ctx context.Context, name string) (store.Playbook, error) {
	defer s.timed("get_playbook_by_name", time.Now())
	return getPlaybook(ctx, s.r, "name", name)
}

// ListPlaybooks implements store.PlaybookStore.
func (s *Store) ListPlaybooks(ctx context.Context, p store.ListPlaybooksParams) ([]store.Playbook, error) {
	defer s.timed("list_playbooks", time.Now())
	query, args := byNamePage(`SELECT `+playbookCols+` FROM studio_playbooks`, p.Project, p.Query, p.AfterName, p.Limit)
	return collect(ctx, s.r, "list playbooks", scanPlaybook, query, args...)
}

// playbooks is the playbook table for the shared update transaction.
var playbooks = resource[store.Playbook]{
	kind: store.KindPlaybook, table: "studio_playbooks",
	load: func(ctx context.Context, q querier, id, lock string) (store.Playbook, error) {
		return loadPlaybook(ctx, q, "id", id, lock)
	},
	lock:    func(l *locks) string { return l.update },
	version: func(p store.Playbook) int64 { return p.Version },
	name:    func(p store.Playbook) string { return p.Name },
}

// UpdatePlaybook implements store.PlaybookStore.
func (s *Store) UpdatePlaybook(ctx context.Context, p store.UpdatePlaybookParams) (store.Playbook, error) {
	defer s.timed("update_playbook", time.Now())
	var out store.Playbook
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = playbooks.update(ctx, tx, change[store.Playbook]{ID: p.ID, ExpectedVersion: p.ExpectedVersion, Name: p.Name, Audit: p.Audit,
			apply: func(cur store.Playbook, name string) error {
				next := cur
				next.Name = name
				if p.Description != nil {
					next.Description = *p.Description
				}
				if p.Prompt != nil {
					next.Prompt = *p.Prompt
				}
				if p.Args != nil {
					next.Args = argsOrEmpty(*p.Args)
				}
				args, err := encodeJSON(argsOrEmpty(next.Args))
				if err != nil {
					return err
				}
				res, err := tx.ExecContext(ctx, `UPDATE studio_playbooks
					SET name = ?, description = ?, prompt = ?, args_json = ?, version = version + 1, updated_at = ?
					WHERE id = ? AND version = ?`,
					next.Name, next.Description, next.Prompt, args, ts(p.Now), p.ID, cur.Version)
				if err != nil {
					return fmt.Errorf("update playbook: %w", err)
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return fmt.Errorf("update playbook: %d rows changed", n)
				}
				return nil
			}})
		return err
	})
	return out, err
}

// DeletePlaybook implements store.PlaybookStore.
func (s *Store) DeletePlaybook(ctx context.Context, p store.DeletePlaybookParams) (store.Playbook, error) {
	defer s.timed("delete_playbook", time.Now())
	var out store.Playbook
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = playbooks.remove(ctx, tx, change[store.Playbook]{ID: p.ID, ExpectedVersion: p.ExpectedVersion, Audit: p.Audit,
			apply: func(cur store.Playbook, _ string) error {
				users, err := playbookUsers(ctx, tx, p.ID)
				if err != nil {
					return err
				}
				if len(users) > 0 {
					return protocol.Errorf(protocol.Conflict, "playbook %s is used by %s", cur.Name, strings.Join(users, ", ")).
						With("usedBy", users)
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM studio_playbooks WHERE id = ?`, p.ID); err != nil {
					return fmt.Errorf("delete playbook: %w", err)
				}
				return nil
			}})
		return err
	})
	return out, err
}

// playbookUsers names the workflows and schedules that use a playbook.
func playbookUsers(ctx context.Context, tx *writeTx, id string) ([]string, error) {
	return collect(ctx, tx.conn, "playbook users", scanString, `
		SELECT DISTINCT 'workflow ' || w.name FROM studio_workflow_steps ws
		  JOIN studio_workflows w ON w.id = ws.workflow_id WHERE ws.playbook_id = ?
		UNION
		SELECT 'schedule ' || name FROM studio_schedules WHERE playbook_id = ?
		ORDER BY 1 LIMIT 20`, id, id)
}

// playbookExists checks a playbook that a new reference will name and,
// where rows are locked, keeps it (FOR KEY SHARE) until the transaction
// ends: a concurrent DeletePlaybook waits, then sees the reference and
// refuses.
func playbookExists(ctx context.Context, tx *writeTx, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM studio_playbooks WHERE id = ?`+tx.locks.keyShare, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("playbook", id)
	}
	if err != nil {
		return fmt.Errorf("check playbook: %w", err)
	}
	return nil
}
