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

const runCols = `id, project, playbook_id, playbook_name, playbook_version, prompt, input, args_json, status,
	run_trigger, schedule_id, retry_of, output, output_truncated, error_code, error_message, version,
	created_at, updated_at, started_at, ended_at, cancel_requested_at, workflow_id, workflow_step, owner_instance, owner_epoch`

func scanRun(row scanner) (store.Run, error) {
	var r store.Run
	var args string
	var schedule, retryOf, code, msg, workflow, owner sql.NullString
	var step sql.NullInt64
	var truncated int
	var created, updated float64
	var started, ended, cancelReq sql.NullFloat64
	err := row.Scan(&r.ID, &r.Project, &r.PlaybookID, &r.PlaybookName, &r.PlaybookVersion, &r.Prompt, &r.Input, &args,
		&r.Status, &r.Trigger, &schedule, &retryOf, &r.Output, &truncated, &code, &msg, &r.Version,
		&created, &updated, &started, &ended, &cancelReq, &workflow, &step, &owner, &r.Epoch)
	if err != nil {
		return r, err
	}
	r.WorkflowID = nullString(workflow)
	if step.Valid {
		n := int(step.Int64)
		r.WorkflowStep = &n
	}
	r.Owner = owner.String
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
		 schedule_id, retry_of, version, created_at, updated_at, workflow_id, workflow_step)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, 1, ?, ?, ?, ?)`,
		p.ID, project, pb.ID, pb.Name, pb.Version, pb.Prompt, p.Input, args, p.Trigger,
		p.ScheduleID, p.RetryOf, ts(p.Now), ts(p.Now), p.WorkflowID, p.WorkflowStep); err != nil {
		return store.Run{}, fmt.Errorf("create run: %w", err)
	}
	if err := audit(ctx, tx, p.Audit); err != nil {
		return store.Run{}, err
	}
	tx.control(store.RunsQueued) // every daemon's idle workers may claim it
	tx.changed(store.ChangeRunCreated, p.ID)
	return getRun(ctx, tx, p.ID)
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, p store.CreateRunParams) (store.Run, error) {
	defer s.timed("create_run", time.Now())
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
	defer s.timed("get_run", time.Now())
	return getRun(ctx, s.r, id)
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, p store.ListRunsParams) ([]store.Run, error) {
	defer s.timed("list_runs", time.Now())
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
	if p.WorkflowID != "" {
		add(`workflow_id = ?`, p.WorkflowID)
	}
	if p.Query != "" {
		add(runQueryCond, runQueryArgs(p.Query)...)
	}
	if p.IDPrefix != "" {
		add(`id LIKE ? ESCAPE '\'`, strings.TrimPrefix(likePattern(p.IDPrefix), "%"))
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
	defer s.timed("claim_run", time.Now())
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
		res, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = 'running', started_at = ?, updated_at = ?, version = version + 1,
			owner_instance = ?, owner_epoch = owner_epoch + 1 WHERE id = ? AND status = 'queued'`, ts(p.Now), ts(p.Now), nullIfEmpty(p.Instance), id)
		if err != nil {
			return fmt.Errorf("claim run: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		tx.changed(store.ChangeRunChanged, id)
		out, err = getRun(ctx, tx, id)
		ok = err == nil
		return err
	})
	return out, ok, err
}

// FinishRun implements store.RunStore.
func (s *Store) FinishRun(ctx context.Context, p store.FinishRunParams) (store.Run, error) {
	defer s.timed("finish_run", time.Now())
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
		if p.Instance != "" && cur.Owner != p.Instance {
			return protocol.Errorf(protocol.Conflict, "run %s is owned by instance %q", p.ID, cur.Owner).With("status", string(cur.Status))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = ?, output = ?, output_truncated = ?,
			error_code = ?, error_message = ?, ended_at = ?, updated_at = ?, version = version + 1, owner_instance = NULL, owner_epoch = owner_epoch + 1
			WHERE id = ? AND status = 'running'`,
			p.Status, p.Output, boolInt(p.OutputTruncated), p.ErrorCode, p.ErrorMessage, ts(p.Now), ts(p.Now), p.ID); err != nil {
			return fmt.Errorf("finish run: %w", err)
		}
		tx.changed(store.ChangeRunChanged, p.ID)
		if out, err = getRun(ctx, tx, p.ID); err != nil {
			return err
		}
		return enqueueRunFailed(ctx, tx, out, p.Now)
	})
	return out, err
}

// CancelRun implements store.RunStore.
func (s *Store) CancelRun(ctx context.Context, p store.CancelRunParams) (store.Run, error) {
	defer s.timed("cancel_run", time.Now())
	var out store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadRun(ctx, tx, p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if err := checkVersion(store.KindRun, p.ID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		tx.control(store.RunKey(p.ID)) // its executor, wherever it runs, stops it
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
		tx.changed(store.ChangeRunChanged, p.ID)
		out, err = getRun(ctx, tx, p.ID)
		return err
	})
	return out, err
}

// RecoverRuns implements store.RunStore.
func (s *Store) RecoverRuns(ctx context.Context, p store.RecoverRunsParams) ([]store.Run, error) {
	defer s.timed("recover_runs", time.Now())
	var out []store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		ids, err := collect(ctx, tx.conn, "recover runs", scanString, `SELECT id FROM studio_runs WHERE status IN ('queued', 'running')
			ORDER BY created_at, id`+tx.locks.update)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = 'failed', error_code = ?, error_message = ?,
				ended_at = ?, updated_at = ?, version = version + 1, owner_instance = NULL, owner_epoch = owner_epoch + 1 WHERE id = ? AND status IN ('queued', 'running')`,
				p.ErrorCode, p.ErrorMessage, ts(p.Now), ts(p.Now), id); err != nil {
				return fmt.Errorf("recover run: %w", err)
			}
			tx.changed(store.ChangeRunChanged, id)
			r, err := getRun(ctx, tx, id)
			if err != nil {
				return err
			}
			if err := enqueueRunFailed(ctx, tx, r, p.Now); err != nil {
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
	defer s.timed("run_stats", time.Now())
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
	filter, fargs := runStatsFilter(p)
	rows, err := tx.QueryContext(ctx, `SELECT status, COUNT(*) FROM studio_runs WHERE created_at >= ? AND created_at < ?`+filter+` GROUP BY status`,
		append([]any{since, until}, fargs...)...)
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
	finished := ` FROM studio_runs WHERE created_at >= ? AND created_at < ? AND started_at IS NOT NULL AND ended_at IS NOT NULL` + filter
	window := append([]any{since, until}, fargs...)
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*)`+finished, window...).Scan(&n); err != nil {
		return st, fmt.Errorf("run stats: %w", err)
	}
	if n == 0 {
		return st, nil
	}
	// The median: the middle value, or the mean of the two middle values.
	take := 1 + (1 - n%2)
	mrows, err := tx.QueryContext(ctx, `SELECT ended_at - started_at AS d`+finished+` ORDER BY d LIMIT ? OFFSET ?`, append(window, take, (n-1)/2)...)
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
