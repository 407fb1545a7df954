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

// The application resources of store.AppStore. Writes go through s.txn. A
// write reads the row it checks with the dialect's lock (FOR UPDATE on
// PostgreSQL; SQLite's one writer connection, BEGIN IMMEDIATE, runs writes
// one at a time), so the check cannot race another writer in this process
// or another. A duplicate name that two PostgreSQL writers insert at once
// is a unique violation, and txn's retry turns it into the ordinary
// conflict.

// slotRetention is how long handled schedule slots are kept; the
// compare-and-set on next_run_at is what makes a slot fire once, the slot
// rows are its backstop and history.
const slotRetention = 30 * 24 * time.Hour

func versionConflict(kind, id string, expected, actual int64) error {
	return protocol.Errorf(protocol.Conflict, "%s %s is at version %d, not the expected %d", kind, id, actual, expected).
		With("kind", kind).With("expectedVersion", expected).With("actualVersion", actual)
}

func checkVersion(kind, id string, expected, actual int64) error {
	if expected != 0 && expected != actual {
		return versionConflict(kind, id, expected, actual)
	}
	return nil
}

func nameTaken(kind, name, id string) error {
	return protocol.Errorf(protocol.Conflict, "a %s named %q already exists", kind, name).
		With("kind", kind).With("name", name).With("id", id)
}

func audit(ctx context.Context, tx *writeTx, p *store.AppendAdminEventParams) error {
	if p == nil {
		return nil
	}
	_, err := appendAdminEvent(ctx, tx, *p)
	return err
}

func encodeJSON(v any) (string, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	return string(b), nil
}

func decodeArgs(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode args: %w", err)
	}
	return m, nil
}

// likePattern is a case-insensitive substring pattern for LIKE ... ESCAPE '\'.
func likePattern(q string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(strings.ToLower(q)) + "%"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nameOwner returns the id of the row of table named name, "" if none.
func nameOwner(ctx context.Context, q querier, table, name string) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT id FROM `+table+` WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up name: %w", err)
	}
	return id, nil
}

// --- playbooks ---------------------------------------------------------------

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
	var out store.Playbook
	err := s.txn(ctx, func(tx *writeTx) error {
		if id, err := nameOwner(ctx, tx, "studio_playbooks", p.Name); err != nil {
			return err
		} else if id != "" {
			return nameTaken(store.KindPlaybook, p.Name, id)
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
	return getPlaybook(ctx, s.r, "id", id)
}

// GetPlaybookByName implements store.PlaybookStore.
func (s *Store) GetPlaybookByName(ctx context.Context, name string) (store.Playbook, error) {
	return getPlaybook(ctx, s.r, "name", name)
}

// ListPlaybooks implements store.PlaybookStore.
func (s *Store) ListPlaybooks(ctx context.Context, p store.ListPlaybooksParams) ([]store.Playbook, error) {
	query, args := byNamePage(`SELECT `+playbookCols+` FROM studio_playbooks`, p.Project, p.Query, p.AfterName, p.Limit)
	return collect(ctx, s.r, "list playbooks", scanPlaybook, query, args...)
}

// UpdatePlaybook implements store.PlaybookStore.
func (s *Store) UpdatePlaybook(ctx context.Context, p store.UpdatePlaybookParams) (store.Playbook, error) {
	var out store.Playbook
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadPlaybook(ctx, tx, "id", p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindPlaybook, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		next := cur
		if p.Name != nil && *p.Name != cur.Name {
			if id, err := nameOwner(ctx, tx, "studio_playbooks", *p.Name); err != nil {
				return err
			} else if id != "" {
				return nameTaken(store.KindPlaybook, *p.Name, id)
			}
			next.Name = *p.Name
		}
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
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = getPlaybook(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// DeletePlaybook implements store.PlaybookStore.
func (s *Store) DeletePlaybook(ctx context.Context, p store.DeletePlaybookParams) (store.Playbook, error) {
	var out store.Playbook
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadPlaybook(ctx, tx, "id", p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindPlaybook, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
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
		out = cur
		return audit(ctx, tx, p.Audit)
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

// --- workflows ---------------------------------------------------------------

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
	var out store.Workflow
	err := s.txn(ctx, func(tx *writeTx) error {
		if id, err := nameOwner(ctx, tx, "studio_workflows", p.Name); err != nil {
			return err
		} else if id != "" {
			return nameTaken(store.KindWorkflow, p.Name, id)
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
		var err error
		out, err = getWorkflow(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// GetWorkflow implements store.WorkflowStore.
func (s *Store) GetWorkflow(ctx context.Context, id string) (store.Workflow, error) {
	return getWorkflow(ctx, s.r, "id", id)
}

// GetWorkflowByName implements store.WorkflowStore.
func (s *Store) GetWorkflowByName(ctx context.Context, name string) (store.Workflow, error) {
	return getWorkflow(ctx, s.r, "name", name)
}

// ListWorkflows implements store.WorkflowStore.
func (s *Store) ListWorkflows(ctx context.Context, p store.ListWorkflowsParams) ([]store.Workflow, error) {
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

// UpdateWorkflow implements store.WorkflowStore.
func (s *Store) UpdateWorkflow(ctx context.Context, p store.UpdateWorkflowParams) (store.Workflow, error) {
	var out store.Workflow
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadWorkflow(ctx, tx, "id", p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindWorkflow, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		name, desc := cur.Name, cur.Description
		if p.Name != nil && *p.Name != cur.Name {
			if id, err := nameOwner(ctx, tx, "studio_workflows", *p.Name); err != nil {
				return err
			} else if id != "" {
				return nameTaken(store.KindWorkflow, *p.Name, id)
			}
			name = *p.Name
		}
		if p.Description != nil {
			desc = *p.Description
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_workflows SET name = ?, description = ?, version = version + 1, updated_at = ?
			WHERE id = ?`, name, desc, ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("update workflow: %w", err)
		}
		if p.Steps != nil {
			if err := writeSteps(ctx, tx, p.ID, *p.Steps); err != nil {
				return err
			}
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = getWorkflow(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// --- runs --------------------------------------------------------------------

const runCols = `id, project, playbook_id, playbook_name, playbook_version, prompt, input, args_json, status,
	run_trigger, schedule_id, retry_of, output, output_truncated, error_code, error_message, version,
	created_at, updated_at, started_at, ended_at, cancel_requested_at`

func scanRun(row scanner) (store.Run, error) {
	var r store.Run
	var args string
	var schedule, retryOf, code, msg sql.NullString
	var truncated int
	var created, updated float64
	var started, ended, cancelReq sql.NullFloat64
	err := row.Scan(&r.ID, &r.Project, &r.PlaybookID, &r.PlaybookName, &r.PlaybookVersion, &r.Prompt, &r.Input, &args,
		&r.Status, &r.Trigger, &schedule, &retryOf, &r.Output, &truncated, &code, &msg, &r.Version,
		&created, &updated, &started, &ended, &cancelReq)
	if err != nil {
		return r, err
	}
	if r.Args, err = decodeArgs(args); err != nil {
		return r, err
	}
	r.ScheduleID, r.RetryOf, r.ErrorCode, r.ErrorMessage = nullString(schedule), nullString(retryOf), nullString(code), nullString(msg)
	r.OutputTruncated = truncated != 0
	r.CreatedAt, r.UpdatedAt = fromTS(created), fromTS(updated)
	r.StartedAt, r.EndedAt, r.CancelRequestedAt = nullTS(started), nullTS(ended), nullTS(cancelReq)
	return r, nil
}

func getRun(ctx context.Context, q querier, id string) (store.Run, error) {
	return loadRun(ctx, q, id, "")
}

func loadRun(ctx context.Context, q querier, id, lock string) (store.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runCols+` FROM studio_runs WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, notFound("run", id)
	}
	if err != nil {
		return r, fmt.Errorf("get run: %w", err)
	}
	return r, nil
}

// createRun inserts a queued run inside the caller's transaction.
func createRun(ctx context.Context, tx *writeTx, p store.CreateRunParams) (store.Run, error) {
	pb, err := getPlaybook(ctx, tx, "id", p.PlaybookID)
	if err != nil {
		return store.Run{}, err
	}
	if err := checkVersion(store.KindPlaybook, pb.ID, p.ExpectedPlaybookVersion, pb.Version); err != nil {
		return store.Run{}, err
	}
	if p.RetryOf != nil {
		prev, err := getRun(ctx, tx, *p.RetryOf)
		if err != nil {
			return store.Run{}, err
		}
		if err := checkVersion(store.KindRun, prev.ID, p.ExpectedRetryOfVersion, prev.Version); err != nil {
			return store.Run{}, err
		}
		if prev.Status != store.RunFailed && prev.Status != store.RunCancelled {
			return store.Run{}, protocol.Errorf(protocol.Conflict, "run %s is %s; only failed or cancelled runs can be retried", prev.ID, prev.Status).
				With("status", string(prev.Status))
		}
	}
	switch p.Trigger {
	case store.TriggerManual, store.TriggerSchedule, store.TriggerOperator:
	default:
		return store.Run{}, protocol.Errorf(protocol.Validation, "run trigger %q is unknown", p.Trigger)
	}
	project := p.Project
	if project == "" {
		project = pb.Project
	}
	args, err := encodeJSON(argsMap(p.Args))
	if err != nil {
		return store.Run{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO studio_runs
		(id, project, playbook_id, playbook_name, playbook_version, prompt, input, args_json, status, run_trigger,
		 schedule_id, retry_of, version, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, 1, ?, ?)`,
		p.ID, project, pb.ID, pb.Name, pb.Version, pb.Prompt, p.Input, args, p.Trigger,
		p.ScheduleID, p.RetryOf, ts(p.Now), ts(p.Now)); err != nil {
		return store.Run{}, fmt.Errorf("create run: %w", err)
	}
	if err := audit(ctx, tx, p.Audit); err != nil {
		return store.Run{}, err
	}
	return getRun(ctx, tx, p.ID)
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, p store.CreateRunParams) (store.Run, error) {
	var out store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = createRun(ctx, tx, p)
		return err
	})
	return out, err
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	return getRun(ctx, s.r, id)
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, p store.ListRunsParams) ([]store.Run, error) {
	query := `SELECT ` + runCols + ` FROM studio_runs WHERE 1 = 1`
	var args []any
	add := func(cond string, vals ...any) {
		query += ` AND ` + cond
		args = append(args, vals...)
	}
	if p.Status != "" {
		add(`status = ?`, p.Status)
	}
	if p.PlaybookID != "" {
		add(`playbook_id = ?`, p.PlaybookID)
	}
	if p.Project != "" {
		add(`project = ?`, p.Project)
	}
	if p.Trigger != "" {
		add(`run_trigger = ?`, p.Trigger)
	}
	if p.ScheduleID != "" {
		add(`schedule_id = ?`, p.ScheduleID)
	}
	if p.Since != nil {
		add(`created_at >= ?`, ts(*p.Since))
	}
	if p.Until != nil {
		add(`created_at < ?`, ts(*p.Until))
	}
	if p.BeforeCreated != nil {
		c := ts(*p.BeforeCreated)
		add(`(created_at < ? OR (created_at = ? AND id < ?))`, c, c, p.BeforeID)
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limitOr(p.Limit, 50))
	return collect(ctx, s.r, "list runs", scanRun, query, args...)
}

// ClaimRun implements store.RunStore.
func (s *Store) ClaimRun(ctx context.Context, p store.ClaimRunParams) (store.Run, bool, error) {
	var out store.Run
	var ok bool
	err := s.txn(ctx, func(tx *writeTx) error {
		var id string
		// SKIP LOCKED, where rows are locked: a run another claimer holds is
		// passed over, not waited for, so concurrent claimers take different runs.
		err := tx.QueryRowContext(ctx, `SELECT id FROM studio_runs WHERE status = 'queued'
			ORDER BY created_at, id LIMIT 1`+tx.locks.skipLocked).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim run: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = 'running', started_at = ?, updated_at = ?, version = version + 1
			WHERE id = ? AND status = 'queued'`, ts(p.Now), ts(p.Now), id)
		if err != nil {
			return fmt.Errorf("claim run: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		out, err = getRun(ctx, tx, id)
		ok = err == nil
		return err
	})
	return out, ok, err
}

// FinishRun implements store.RunStore.
func (s *Store) FinishRun(ctx context.Context, p store.FinishRunParams) (store.Run, error) {
	var out store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		if !p.Status.Terminal() {
			return fmt.Errorf("finish run: %s is not a terminal status", p.Status)
		}
		cur, err := loadRun(ctx, tx, p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if cur.Status != store.RunRunning {
			return protocol.Errorf(protocol.Conflict, "run %s is %s, not running", p.ID, cur.Status).With("status", string(cur.Status))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = ?, output = ?, output_truncated = ?,
			error_code = ?, error_message = ?, ended_at = ?, updated_at = ?, version = version + 1
			WHERE id = ? AND status = 'running'`,
			p.Status, p.Output, boolInt(p.OutputTruncated), p.ErrorCode, p.ErrorMessage, ts(p.Now), ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("finish run: %w", err)
		}
		out, err = getRun(ctx, tx, p.ID)
		return err
	})
	return out, err
}

// CancelRun implements store.RunStore.
func (s *Store) CancelRun(ctx context.Context, p store.CancelRunParams) (store.Run, error) {
	var out store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadRun(ctx, tx, p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindRun, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		switch cur.Status {
		case store.RunQueued:
			if _, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = 'cancelled', error_code = ?, error_message = ?,
				cancel_requested_at = ?, ended_at = ?, updated_at = ?, version = version + 1 WHERE id = ?`,
				string(protocol.Cancelled), "cancelled before it started", ts(p.Now), ts(p.Now), ts(p.Now), p.ID); err != nil {
				return fmt.Errorf("cancel run: %w", err)
			}
		case store.RunRunning:
			if cur.CancelRequestedAt == nil {
				if _, err := tx.ExecContext(ctx, `UPDATE studio_runs SET cancel_requested_at = ?, updated_at = ?, version = version + 1
					WHERE id = ?`, ts(p.Now), ts(p.Now), p.ID); err != nil {
					return fmt.Errorf("cancel run: %w", err)
				}
			}
		default:
			return protocol.Errorf(protocol.Conflict, "run %s already ended %s", p.ID, cur.Status).With("status", string(cur.Status))
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = getRun(ctx, tx, p.ID)
		return err
	})
	return out, err
}

// RecoverRuns implements store.RunStore.
func (s *Store) RecoverRuns(ctx context.Context, p store.RecoverRunsParams) ([]store.Run, error) {
	var out []store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		ids, err := collect(ctx, tx.conn, "recover runs", scanString, `SELECT id FROM studio_runs WHERE status IN ('queued', 'running')
			ORDER BY created_at, id`+tx.locks.update)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = 'failed', error_code = ?, error_message = ?,
				ended_at = ?, updated_at = ?, version = version + 1 WHERE id = ? AND status IN ('queued', 'running')`,
				p.ErrorCode, p.ErrorMessage, ts(p.Now), ts(p.Now), id); err != nil {
				return fmt.Errorf("recover run: %w", err)
			}
			r, err := getRun(ctx, tx, id)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// RunStats implements store.RunStore.
func (s *Store) RunStats(ctx context.Context, p store.RunStatsParams) (store.RunStats, error) {
	st := store.RunStats{Counts: map[store.RunStatus]int64{}}
	for _, status := range store.RunStatuses {
		st.Counts[status] = 0
	}
	tx, err := s.readTx(ctx)
	if err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	defer tx.Rollback()
	since, until := ts(p.Since), ts(p.Until)
	rows, err := tx.QueryContext(ctx, `SELECT status, COUNT(*) FROM studio_runs WHERE created_at >= ? AND created_at < ? GROUP BY status`, since, until)
	if err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	for rows.Next() {
		var status store.RunStatus
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("run stats: %w", err)
		}
		st.Counts[status] = n
		st.Total += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	const finished = ` FROM studio_runs WHERE created_at >= ? AND created_at < ? AND started_at IS NOT NULL AND ended_at IS NOT NULL`
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*)`+finished, since, until).Scan(&n); err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	if n == 0 {
		return st, nil
	}
	// The median: the middle value, or the mean of the two middle values.
	take := 1 + (1 - n%2)
	mrows, err := tx.QueryContext(ctx, `SELECT ended_at - started_at AS d`+finished+` ORDER BY d LIMIT ? OFFSET ?`, since, until, take, (n-1)/2)
	if err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	defer mrows.Close()
	var sum float64
	var got int64
	for mrows.Next() {
		var d float64
		if err := mrows.Scan(&d); err != nil {
			return st, fmt.Errorf("run stats: %w", err)
		}
		sum += d
		got++
	}
	if err := mrows.Err(); err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	if got > 0 {
		med := time.Duration(sum / float64(got) * float64(time.Second)).Round(time.Millisecond)
		st.MedianDuration = &med
	}
	return st, nil
}

// --- schedules ---------------------------------------------------------------

const scheduleCols = `s.id, s.project, s.name, s.cron, s.playbook_id, COALESCE(p.name, ''), s.input, s.args_json, s.enabled,
	s.next_run_at, s.last_run_at, s.last_run_id, s.skipped_runs, s.last_skipped_at, s.version, s.created_at, s.updated_at`

const scheduleFrom = ` FROM studio_schedules s LEFT JOIN studio_playbooks p ON p.id = s.playbook_id`

func scanSchedule(row scanner) (store.Schedule, error) {
	var sc store.Schedule
	var args string
	var enabled int
	var next, last, lastSkipped sql.NullFloat64
	var lastRun sql.NullString
	var created, updated float64
	err := row.Scan(&sc.ID, &sc.Project, &sc.Name, &sc.Cron, &sc.PlaybookID, &sc.PlaybookName, &sc.Input, &args, &enabled,
		&next, &last, &lastRun, &sc.SkippedRuns, &lastSkipped, &sc.Version, &created, &updated)
	if err != nil {
		return sc, err
	}
	if sc.Args, err = decodeArgs(args); err != nil {
		return sc, err
	}
	sc.Enabled = enabled != 0
	sc.NextRunAt, sc.LastRunAt, sc.LastSkippedAt = nullTS(next), nullTS(last), nullTS(lastSkipped)
	sc.LastRunID = nullString(lastRun)
	sc.CreatedAt, sc.UpdatedAt = fromTS(created), fromTS(updated)
	return sc, nil
}

func getSchedule(ctx context.Context, q querier, where string, arg any) (store.Schedule, error) {
	return loadSchedule(ctx, q, where, arg, "")
}

func loadSchedule(ctx context.Context, q querier, where string, arg any, lock string) (store.Schedule, error) {
	sc, err := scanSchedule(q.QueryRowContext(ctx, `SELECT `+scheduleCols+scheduleFrom+` WHERE s.`+where+` = ?`+lock, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return sc, notFound("schedule", fmt.Sprint(arg))
	}
	if err != nil {
		return sc, fmt.Errorf("get schedule: %w", err)
	}
	return sc, nil
}

// CreateSchedule implements store.ScheduleStore.
func (s *Store) CreateSchedule(ctx context.Context, p store.CreateScheduleParams) (store.Schedule, error) {
	var out store.Schedule
	err := s.txn(ctx, func(tx *writeTx) error {
		if id, err := nameOwner(ctx, tx, "studio_schedules", p.Name); err != nil {
			return err
		} else if id != "" {
			return nameTaken(store.KindSchedule, p.Name, id)
		}
		if err := playbookExists(ctx, tx, p.PlaybookID); err != nil {
			return err
		}
		args, err := encodeJSON(argsMap(p.Args))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_schedules
			(id, project, name, cron, playbook_id, input, args_json, enabled, next_run_at, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			p.ID, p.Project, p.Name, p.Cron, p.PlaybookID, p.Input, args, boolInt(p.Enabled), tsOrNil(p.NextRunAt),
			ts(p.Now), ts(p.Now)); err != nil {
			return fmt.Errorf("create schedule: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = getSchedule(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	return getSchedule(ctx, s.r, "id", id)
}

// GetScheduleByName implements store.ScheduleStore.
func (s *Store) GetScheduleByName(ctx context.Context, name string) (store.Schedule, error) {
	return getSchedule(ctx, s.r, "name", name)
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context, p store.ListSchedulesParams) ([]store.Schedule, error) {
	query := `SELECT ` + scheduleCols + scheduleFrom + ` WHERE 1 = 1`
	var args []any
	if p.Enabled != nil {
		query += ` AND s.enabled = ?`
		args = append(args, boolInt(*p.Enabled))
	}
	if p.PlaybookID != "" {
		query += ` AND s.playbook_id = ?`
		args = append(args, p.PlaybookID)
	}
	if p.Query != "" {
		query += ` AND (lower(s.name) LIKE ? ESCAPE '\' OR lower(s.input) LIKE ? ESCAPE '\')`
		args = append(args, likePattern(p.Query), likePattern(p.Query))
	}
	if p.AfterName != "" {
		query += ` AND s.name > ?`
		args = append(args, p.AfterName)
	}
	query += ` ORDER BY s.name LIMIT ?`
	args = append(args, limitOr(p.Limit, 50))
	return collect(ctx, s.r, "list schedules", scanSchedule, query, args...)
}

// UpdateSchedule implements store.ScheduleStore.
func (s *Store) UpdateSchedule(ctx context.Context, p store.UpdateScheduleParams) (store.Schedule, error) {
	var out store.Schedule
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadSchedule(ctx, tx, "id", p.ID, tx.locks.updateSchedule)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindSchedule, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		next := cur
		if p.Name != nil && *p.Name != cur.Name {
			if id, err := nameOwner(ctx, tx, "studio_schedules", *p.Name); err != nil {
				return err
			} else if id != "" {
				return nameTaken(store.KindSchedule, *p.Name, id)
			}
			next.Name = *p.Name
		}
		if p.Cron != nil {
			next.Cron = *p.Cron
		}
		if p.PlaybookID != nil {
			if err := playbookExists(ctx, tx, *p.PlaybookID); err != nil {
				return err
			}
			next.PlaybookID = *p.PlaybookID
		}
		if p.Input != nil {
			next.Input = *p.Input
		}
		if p.Args != nil {
			next.Args = *p.Args
		}
		if p.Enabled != nil {
			next.Enabled = *p.Enabled
		}
		if p.SetNextRunAt {
			next.NextRunAt = p.NextRunAt
		}
		args, err := encodeJSON(argsMap(next.Args))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_schedules SET name = ?, cron = ?, playbook_id = ?, input = ?, args_json = ?,
			enabled = ?, next_run_at = ?, version = version + 1, updated_at = ? WHERE id = ?`,
			next.Name, next.Cron, next.PlaybookID, next.Input, args, boolInt(next.Enabled), tsOrNil(next.NextRunAt),
			ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("update schedule: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = getSchedule(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, p store.DeleteScheduleParams) (store.Schedule, error) {
	var out store.Schedule
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadSchedule(ctx, tx, "id", p.ID, tx.locks.updateSchedule)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindSchedule, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_schedule_slots WHERE schedule_id = ?`, p.ID); err != nil {
			return fmt.Errorf("delete schedule slots: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_schedules WHERE id = ?`, p.ID); err != nil {
			return fmt.Errorf("delete schedule: %w", err)
		}
		out = cur
		return audit(ctx, tx, p.Audit)
	})
	return out, err
}

// DueSchedules implements store.ScheduleStore.
func (s *Store) DueSchedules(ctx context.Context, p store.DueSchedulesParams) ([]store.Schedule, error) {
	return collect(ctx, s.r, "due schedules", scanSchedule, `SELECT `+scheduleCols+scheduleFrom+`
		WHERE s.enabled = 1 AND s.next_run_at IS NOT NULL AND s.next_run_at <= ?
		ORDER BY s.next_run_at, s.id LIMIT ?`, ts(p.Now), limitOr(p.Limit, 100))
}

// FireSchedule implements store.ScheduleStore.
func (s *Store) FireSchedule(ctx context.Context, p store.FireScheduleParams) (store.FireScheduleResult, error) {
	var out store.FireScheduleResult
	err := s.txn(ctx, func(tx *writeTx) error {
		// The claim: only the scheduler that moves next_run_at on from the
		// value it saw handles these slots.
		res, err := tx.ExecContext(ctx, `UPDATE studio_schedules SET next_run_at = ?
			WHERE id = ? AND enabled = 1 AND next_run_at = ?`, ts(p.NextRunAt), p.ScheduleID, ts(p.DueAt))
		if err != nil {
			return fmt.Errorf("claim schedule slot: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			if _, err := getSchedule(ctx, tx, "id", p.ScheduleID); err != nil {
				return err
			}
			return protocol.Errorf(protocol.Conflict, "schedule %s slot %s was already handled or the schedule changed",
				p.ScheduleID, p.DueAt.UTC().Format(time.RFC3339))
		}
		if p.Launch != nil {
			// A slot row that exists already means the slot was handled
			// before (say, the clock stepped back): advance, launch nothing.
			res, err := tx.ExecContext(ctx, `INSERT INTO studio_schedule_slots (schedule_id, scheduled_for, outcome, run_id, created_at)
				VALUES (?, ?, 'launched', ?, ?) ON CONFLICT DO NOTHING`, p.ScheduleID, ts(p.LaunchedFor), p.Launch.ID, ts(p.Now))
			if err != nil {
				return fmt.Errorf("record schedule slot: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				run, err := createRun(ctx, tx, *p.Launch)
				if err != nil {
					return err
				}
				out.Run = &run
				if _, err := tx.ExecContext(ctx, `UPDATE studio_schedules SET last_run_at = ?, last_run_id = ? WHERE id = ?`,
					ts(p.LaunchedFor), run.ID, p.ScheduleID); err != nil {
					return fmt.Errorf("record schedule launch: %w", err)
				}
			}
		}
		if p.Skipped > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO studio_schedule_slots (schedule_id, scheduled_for, outcome, skipped_count, created_at)
				VALUES (?, ?, 'skipped', ?, ?) ON CONFLICT DO NOTHING`, p.ScheduleID, ts(p.SkippedFrom), p.Skipped, ts(p.Now)); err != nil {
				return fmt.Errorf("record skipped slots: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE studio_schedules SET skipped_runs = skipped_runs + ?, last_skipped_at = ? WHERE id = ?`,
				p.Skipped, ts(p.SkippedTo), p.ScheduleID); err != nil {
				return fmt.Errorf("record skipped slots: %w", err)
			}
			if err := audit(ctx, tx, p.SkipEvent); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_schedule_slots WHERE schedule_id = ? AND scheduled_for < ?`,
			p.ScheduleID, ts(p.Now.Add(-slotRetention))); err != nil {
			return fmt.Errorf("prune schedule slots: %w", err)
		}
		out.Schedule, err = getSchedule(ctx, tx, "id", p.ScheduleID)
		return err
	})
	return out, err
}

// --- retention and diagnostics ----------------------------------------------

// PurgeFrames implements store.RetentionStore.
func (s *Store) PurgeFrames(ctx context.Context, p store.PurgeFramesParams) (store.PurgeFramesResult, error) {
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
	var out store.PurgeDeletedConversationsResult
	err := s.txn(ctx, func(tx *writeTx) error {
		const doomed = `(SELECT id FROM studio_operator_conversations WHERE status = 'deleted' AND deleted_at < ?)`
		cutoff := ts(p.DeletedBefore)
		ids, err := collect(ctx, tx.conn, "purge conversations", scanString, `SELECT id FROM studio_operator_conversations WHERE status = 'deleted' AND deleted_at < ?`, cutoff)
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
			{"studio_operator_turns", &out.Turns},
		} {
			res, err := tx.ExecContext(ctx, `DELETE FROM `+step.table+` WHERE conversation_id IN `+doomed, cutoff)
			if err != nil {
				return fmt.Errorf("purge %s: %w", step.table, err)
			}
			*step.n, _ = res.RowsAffected()
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_conversations WHERE id IN `+doomed, cutoff)
		if err != nil {
			return fmt.Errorf("purge conversations: %w", err)
		}
		out.Conversations, _ = res.RowsAffected()
		for _, id := range ids {
			tx.touch(id)
		}
		return audit(ctx, tx, p.Audit)
	})
	return out, err
}

// Diagnostics implements store.AppStore.
func (s *Store) Diagnostics(ctx context.Context, p store.DiagnosticsParams) (store.Diagnostics, error) {
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
	rows, err := tx.QueryContext(ctx, `SELECT id, conversation_id, request_id, command_type, summary, created_at, confirmed_at
		FROM studio_operator_proposals WHERE status = 'executing' ORDER BY created_at, id LIMIT ?`, limitOr(p.ProposalLimit, 20))
	if err != nil {
		return d, fmt.Errorf("diagnostics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e store.ExecutingProposal
		var created float64
		var confirmed sql.NullFloat64
		if err := rows.Scan(&e.ID, &e.ConversationID, &e.RequestID, &e.CommandType, &e.Summary, &created, &confirmed); err != nil {
			return d, fmt.Errorf("diagnostics: %w", err)
		}
		e.CreatedAt, e.ConfirmedAt = fromTS(created), nullTS(confirmed)
		d.ExecutingProposals = append(d.ExecutingProposals, e)
	}
	return d, rows.Err()
}
