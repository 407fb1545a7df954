package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/studio/operator/internal/store"
)

const workflowCols = `id, project, name, description, version, created_at, updated_at`

func scanWorkflow(row scanner) (store.Workflow, error) {
	var w store.Workflow
	var created, updated float64
	if err := row.Scan(&w.ID, &w.Project, &w.Name, &w.Description, &w.Version, &created, &updated); err != nil {
		return w, err
	}
	w.CreatedAt, w.UpdatedAt = fromTS(created), fromTS(updated)
	w.Steps = []store.WorkflowStep{}
	return w, nil
}

// loadSteps fills the steps of ws, in order, with their playbook names.
func loadSteps(ctx context.Context, q querier, ws []store.Workflow) error {
	if len(ws) == 0 {
		return nil
	}
	idx := make(map[string]int, len(ws))
	marks := make([]string, len(ws))
	args := make([]any, len(ws))
	for i, w := range ws {
		idx[w.ID] = i
		marks[i] = "?"
		args[i] = w.ID
	}
	rows, err := q.QueryContext(ctx, `SELECT ws.workflow_id, ws.playbook_id, COALESCE(p.name, ''), ws.input, ws.args_json
		FROM studio_workflow_steps ws LEFT JOIN studio_playbooks p ON p.id = ws.playbook_id
		WHERE ws.workflow_id IN (`+strings.Join(marks, ", ")+`) ORDER BY ws.workflow_id, ws.step_index`, args...)
	if err != nil {
		return fmt.Errorf("load workflow steps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var wid, argsJSON string
		var st store.WorkflowStep
		if err := rows.Scan(&wid, &st.PlaybookID, &st.PlaybookName, &st.Input, &argsJSON); err != nil {
			return fmt.Errorf("load workflow steps: %w", err)
		}
		if st.Args, err = decodeArgs(argsJSON); err != nil {
			return err
		}
		i := idx[wid]
		ws[i].Steps = append(ws[i].Steps, st)
	}
	return rows.Err()
}

func getWorkflow(ctx context.Context, q querier, where string, arg any) (store.Workflow, error) {
	return loadWorkflow(ctx, q, where, arg, "")
}

func loadWorkflow(ctx context.Context, q querier, where string, arg any, lock string) (store.Workflow, error) {
	w, err := scanWorkflow(q.QueryRowContext(ctx, `SELECT `+workflowCols+` FROM studio_workflows WHERE `+where+` = ?`+lock, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return w, notFound("workflow", fmt.Sprint(arg))
	}
	if err != nil {
		return w, fmt.Errorf("get workflow: %w", err)
	}
	one := []store.Workflow{w}
	if err := loadSteps(ctx, q, one); err != nil {
		return w, err
	}
	return one[0], nil
}

func writeSteps(ctx context.Context, tx *writeTx, workflowID string, steps []store.WorkflowStep) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM studio_workflow_steps WHERE workflow_id = ?`, workflowID); err != nil {
		return fmt.Errorf("replace workflow steps: %w", err)
	}
	for i, st := range steps {
		if err := playbookExists(ctx, tx, st.PlaybookID); err != nil {
			return err
		}
		args, err := encodeJSON(argsMap(st.Args))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_workflow_steps (workflow_id, step_index, playbook_id, input, args_json)
			VALUES (?, ?, ?, ?, ?)`, workflowID, i, st.PlaybookID, st.Input, args); err != nil {
			return fmt.Errorf("insert workflow step: %w", err)
		}
	}
	return nil
}

func argsMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// CreateWorkflow implements store.WorkflowStore.
func (s *Store) CreateWorkflow(ctx context.Context, p store.CreateWorkflowParams) (store.Workflow, error) {
	defer s.timed("create_workflow", time.Now())
	var out store.Workflow
	err := s.txn(ctx, func(tx *writeTx) error {
		if err := workflows.nameFree(ctx, tx, p.Name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_workflows
			(id, project, name, description, version, created_at, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?)`,
			p.ID, p.Project, p.Name, p.Description, ts(p.Now), ts(p.Now)); err != nil {
			return fmt.Errorf("create workflow: %w", err)
		}
		if err := writeSteps(ctx, tx, p.ID, p.Steps); err != nil {
			return err
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		tx.changed(store.ChangeWorkflowChanged, p.ID)
		var err error
		out, err = getWorkflow(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// GetWorkflow implements store.WorkflowStore.
func (s *Store) GetWorkflow(ctx context.Context, id string) (store.Workflow, error) {
	defer s.timed("get_workflow", time.Now())
	return getWorkflow(ctx, s.r, "id", id)
}

// GetWorkflowByName implements store.WorkflowStore.
func (s *Store) GetWorkflowByName(ctx context.Context, name string) (store.Workflow, error) {
	defer s.timed("get_workflow_by_name", time.Now())
	return getWorkflow(ctx, s.r, "name", name)
}

// ListWorkflows implements store.WorkflowStore.
func (s *Store) ListWorkflows(ctx context.Context, p store.ListWorkflowsParams) ([]store.Workflow, error) {
	defer s.timed("list_workflows", time.Now())
	query, args := byNamePage(`SELECT `+workflowCols+` FROM studio_workflows`, p.Project, p.Query, p.AfterName, p.Limit)
	// One read transaction: the page and its steps come from one snapshot.
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	var out []store.Workflow
	for rows.Next() {
		w, err := scanWorkflow(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		out = append(out, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	if err := loadSteps(ctx, tx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// workflows is the workflow table for the shared update transaction.
var workflows = resource[store.Workflow]{
	kind: store.KindWorkflow, table: "studio_workflows",
	load: func(ctx context.Context, q querier, id, lock string) (store.Workflow, error) {
		return loadWorkflow(ctx, q, "id", id, lock)
	},
	lock:    func(l *locks) string { return l.update },
	version: func(w store.Workflow) int64 { return w.Version },
	name:    func(w store.Workflow) string { return w.Name },
}

// UpdateWorkflow implements store.WorkflowStore.
func (s *Store) UpdateWorkflow(ctx context.Context, p store.UpdateWorkflowParams) (store.Workflow, error) {
	defer s.timed("update_workflow", time.Now())
	var out store.Workflow
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = workflows.update(ctx, tx, change[store.Workflow]{ID: p.ID, ExpectedVersion: p.ExpectedVersion, Name: p.Name, Audit: p.Audit,
			apply: func(cur store.Workflow, name string) error {
				desc := cur.Description
				if p.Description != nil {
					desc = *p.Description
				}
				if _, err := tx.ExecContext(ctx, `UPDATE studio_workflows SET name = ?, description = ?, version = version + 1, updated_at = ?
					WHERE id = ?`, name, desc, ts(p.Now), p.ID); err != nil {
					return fmt.Errorf("update workflow: %w", err)
				}
				if p.Steps != nil {
					return writeSteps(ctx, tx, p.ID, *p.Steps)
				}
				return nil
			}})
		return err
	})
	return out, err
}
