package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The cockpit's queries: run search, counts and activity over
// time, live output, and the audit trail's filters.

// runQueryCond matches a run by its playbook's name or input (substring,
// any case) or its id (prefix).
const runQueryCond = `(lower(playbook_name) LIKE ? ESCAPE '\' OR lower(input) LIKE ? ESCAPE '\' OR id LIKE ? ESCAPE '\')`

func runQueryArgs(q string) []any {
	prefix := strings.TrimPrefix(likePattern(q), "%")
	return []any{likePattern(q), likePattern(q), prefix}
}

// runStatsFilter is RunStats's optional filters as SQL.
func runStatsFilter(p store.RunStatsParams) (string, []any) {
	var cond string
	var args []any
	if p.PlaybookID != "" {
		cond += ` AND playbook_id = ?`
		args = append(args, p.PlaybookID)
	}
	if p.Trigger != "" {
		cond += ` AND run_trigger = ?`
		args = append(args, p.Trigger)
	}
	if p.Query != "" {
		cond += ` AND ` + runQueryCond
		args = append(args, runQueryArgs(p.Query)...)
	}
	return cond, args
}

// auditFilter is ListAdminEvents's newer filters as SQL. details is JSON
// stored as written (SQLite TEXT, PostgreSQL json, not jsonb), so a member
// is matched in its compact text form on both engines.
func auditFilter(p store.ListAdminEventsParams) (string, []any) {
	var cond string
	var args []any
	if p.Actor != "" {
		cond += ` AND actor = ?`
		args = append(args, p.Actor)
	}
	if p.CommandType != "" {
		// The application's rows say commandType, the operator's
		// (docs/design.md §10) command_type.
		cond += ` AND (CAST(details AS TEXT) LIKE ? ESCAPE '\' OR CAST(details AS TEXT) LIKE ? ESCAPE '\')`
		args = append(args, jsonMember("commandType", p.CommandType), jsonMember("command_type", p.CommandType))
	}
	if p.Target != "" {
		cond += ` AND (target_id = ? OR CAST(details AS TEXT) LIKE ? ESCAPE '\')`
		args = append(args, p.Target, jsonMember("id", p.Target))
	}
	if p.Since != nil {
		cond += ` AND created_at >= ?`
		args = append(args, ts(*p.Since))
	}
	if p.Until != nil {
		cond += ` AND created_at < ?`
		args = append(args, ts(*p.Until))
	}
	return cond, args
}

// jsonMember is a LIKE pattern for "name":"value" anywhere in compact JSON.
func jsonMember(name, value string) string {
	b, err := protocol.Marshal(value)
	if err != nil {
		b = []byte(`""`)
	}
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return `%` + r.Replace(`"`+name+`":`+string(b)) + `%`
}

// SaveRunOutput implements store.RunStore.
func (s *Store) SaveRunOutput(ctx context.Context, p store.SaveRunOutputParams) error {
	defer s.timed("save_run_output", time.Now())
	return s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_runs SET output = ?, output_truncated = ?, updated_at = ?
			WHERE id = ? AND status = 'running'`, p.Output, boolInt(p.Truncated), ts(p.Now), p.ID)
		if err != nil {
			return fmt.Errorf("save run output: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		r, err := getRun(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		return protocol.Errorf(protocol.Conflict, "run %s is %s, not running", p.ID, r.Status).With("status", string(r.Status))
	})
}

// RunActivity implements store.RunStore: one grouped query for the
// buckets, one for the duration bins, and the percentiles by offset.
func (s *Store) RunActivity(ctx context.Context, p store.RunActivityParams) (store.RunActivity, error) {
	defer s.timed("run_activity", time.Now())
	var out store.RunActivity
	if len(p.Edges) < 2 {
		return out, protocol.Errorf(protocol.Validation, "activity needs at least two bucket edges")
	}
	for i := 1; i < len(p.Edges); i++ {
		if !p.Edges[i].After(p.Edges[i-1]) {
			return out, protocol.Errorf(protocol.Validation, "bucket edges must increase")
		}
	}
	tx, err := s.readTx(ctx)
	if err != nil {
		return out, fmt.Errorf("run activity: %w", err)
	}
	defer tx.Rollback()
	if err := runBuckets(ctx, tx, p.Edges, &out); err != nil {
		return out, fmt.Errorf("run activity: %w", err)
	}
	since, until := ts(p.Edges[0]), ts(p.Edges[len(p.Edges)-1])
	if err := runDurations(ctx, tx, since, until, p.DurationBounds, &out); err != nil {
		return out, fmt.Errorf("run activity: %w", err)
	}
	return out, nil
}

// runBuckets counts the runs created between each two edges by status,
// every status present (a zero draws as an empty bar, not a gap).
func runBuckets(ctx context.Context, tx readTx, edges []time.Time, out *store.RunActivity) error {
	n := len(edges) - 1
	out.Buckets = make([]map[store.RunStatus]int64, n)
	for i := range out.Buckets {
		out.Buckets[i] = map[store.RunStatus]int64{}
		for _, st := range store.RunStatuses {
			out.Buckets[i][st] = 0
		}
	}
	var bucket strings.Builder
	var args []any
	bucket.WriteString(`CASE`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&bucket, ` WHEN created_at < ? THEN %d`, i-1) // indexes are literals: typed the same on every engine
		args = append(args, ts(edges[i]))
	}
	bucket.WriteString(` END`)
	rows, err := tx.QueryContext(ctx, `SELECT `+bucket.String()+` AS b, status, COUNT(*) FROM studio_runs
		WHERE created_at >= ? AND created_at < ? GROUP BY b, status`, append(args, ts(edges[0]), ts(edges[n]))...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var b, c int64
		var st store.RunStatus
		if err := rows.Scan(&b, &st, &c); err != nil {
			return err
		}
		if b >= 0 && int(b) < n {
			out.Buckets[b][st] += c
			out.Total += c
		}
	}
	return rows.Err()
}

// ranRuns are the runs created in [since, until) that started and ended.
const ranRuns = ` FROM studio_runs WHERE created_at >= ? AND created_at < ? AND started_at IS NOT NULL AND ended_at IS NOT NULL`

// runDurations counts the finished runs of [since, until) into the bins
// bounds draw (the last one open) and finds their median and 90th
// percentile.
func runDurations(ctx context.Context, tx readTx, since, until float64, bounds []time.Duration, out *store.RunActivity) error {
	out.Durations = make([]int64, len(bounds)+1)
	var bin strings.Builder
	var args []any
	bin.WriteString(`CASE`)
	for j, d := range bounds {
		fmt.Fprintf(&bin, ` WHEN ended_at - started_at < ? THEN %d`, j)
		args = append(args, d.Seconds())
	}
	fmt.Fprintf(&bin, ` ELSE %d END`, len(bounds))
	if len(bounds) == 0 {
		bin.Reset()
		bin.WriteString(`0`)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+bin.String()+` AS k, COUNT(*)`+ranRuns+` GROUP BY k`, append(args, since, until)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, c int64
		if err := rows.Scan(&k, &c); err != nil {
			return err
		}
		if k >= 0 && int(k) < len(out.Durations) {
			out.Durations[k] += c
			out.Finished += c
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	if out.Finished == 0 {
		return nil
	}
	if out.Median, err = runQuantile(ctx, tx, since, until, out.Finished, 0.5); err != nil {
		return err
	}
	out.P90, err = runQuantile(ctx, tx, since, until, out.Finished, 0.9)
	return err
}

// runQuantile is the duration below which a fraction q of the finished
// runs of [since, until) lie.
func runQuantile(ctx context.Context, tx readTx, since, until float64, finished int64, q float64) (*time.Duration, error) {
	off := min(int64(q*float64(finished)), finished-1)
	var d float64
	if err := tx.QueryRowContext(ctx, `SELECT ended_at - started_at AS d`+ranRuns+` ORDER BY d LIMIT 1 OFFSET ?`, since, until, off).Scan(&d); err != nil {
		return nil, err
	}
	v := time.Duration(d * float64(time.Second)).Round(time.Millisecond)
	return &v, nil
}

// DeleteWorkflow implements store.WorkflowStore. Steps go with it (ON
// DELETE CASCADE, and explicitly for engines that do not enforce it).
func (s *Store) DeleteWorkflow(ctx context.Context, p store.DeleteWorkflowParams) (store.Workflow, error) {
	defer s.timed("delete_workflow", time.Now())
	var out store.Workflow
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = workflows.remove(ctx, tx, change[store.Workflow]{ID: p.ID, ExpectedVersion: p.ExpectedVersion, Audit: p.Audit,
			apply: func(store.Workflow, string) error {
				if _, err := tx.ExecContext(ctx, `DELETE FROM studio_workflow_steps WHERE workflow_id = ?`, p.ID); err != nil {
					return fmt.Errorf("delete workflow steps: %w", err)
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM studio_workflows WHERE id = ?`, p.ID); err != nil {
					return fmt.Errorf("delete workflow: %w", err)
				}
				return nil
			}})
		return err
	})
	return out, err
}

// LaunchWorkflow implements store.WorkflowStore.
func (s *Store) LaunchWorkflow(ctx context.Context, p store.LaunchWorkflowParams) ([]store.Run, error) {
	defer s.timed("launch_workflow", time.Now())
	var out []store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		out = nil
		w, err := workflows.locked(ctx, tx, change[store.Workflow]{ID: p.WorkflowID, ExpectedVersion: p.ExpectedVersion})
		if err != nil {
			return err
		}
		if len(w.Steps) == 0 {
			return protocol.Errorf(protocol.Conflict, "workflow %s has no steps to launch", w.Name)
		}
		if len(p.RunIDs) != len(w.Steps) || (p.Args != nil && len(p.Args) != len(w.Steps)) {
			return protocol.Errorf(protocol.Conflict, "workflow %s has %d steps, not the %d launched", w.Name, len(w.Steps), len(p.RunIDs)).
				With("steps", len(w.Steps))
		}
		for i, st := range w.Steps {
			args := st.Args
			if p.Args != nil && p.Args[i] != nil {
				args = p.Args[i]
			}
			step := i
			// A millisecond apart: claimed oldest first, the steps start in order.
			r, err := createRun(ctx, tx, store.CreateRunParams{ID: p.RunIDs[i], PlaybookID: st.PlaybookID, Input: st.Input, Args: args,
				Trigger: p.Trigger, WorkflowID: &w.ID, WorkflowStep: &step, Now: p.Now.Add(time.Duration(i) * time.Millisecond)})
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return audit(ctx, tx, p.Audit)
	})
	return out, err
}
