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
	defer s.timed("create_schedule", time.Now())
	var out store.Schedule
	err := s.txn(ctx, func(tx *writeTx) error {
		if err := schedules.nameFree(ctx, tx, p.Name); err != nil {
			return err
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
		tx.changed(store.ChangeScheduleChanged, p.ID)
		out, err = getSchedule(ctx, tx, "id", p.ID)
		return err
	})
	return out, err
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	defer s.timed("get_schedule", time.Now())
	return getSchedule(ctx, s.r, "id", id)
}

// GetScheduleByName implements store.ScheduleStore.
func (s *Store) GetScheduleByName(ctx context.Context, name string) (store.Schedule, error) {
	defer s.timed("get_schedule_by_name", time.Now())
	return getSchedule(ctx, s.r, "name", name)
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context, p store.ListSchedulesParams) ([]store.Schedule, error) {
	defer s.timed("list_schedules", time.Now())
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

// schedules is the schedule table for the shared update transaction. A
// schedule read joins its playbook: the lock takes the schedule row only.
var schedules = resource[store.Schedule]{
	kind: store.KindSchedule, table: "studio_schedules",
	load: func(ctx context.Context, q querier, id, lock string) (store.Schedule, error) {
		return loadSchedule(ctx, q, "id", id, lock)
	},
	lock:    func(l *locks) string { return l.updateSchedule },
	version: func(sc store.Schedule) int64 { return sc.Version },
	name:    func(sc store.Schedule) string { return sc.Name },
}

// UpdateSchedule implements store.ScheduleStore.
func (s *Store) UpdateSchedule(ctx context.Context, p store.UpdateScheduleParams) (store.Schedule, error) {
	defer s.timed("update_schedule", time.Now())
	var out store.Schedule
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = schedules.update(ctx, tx, change[store.Schedule]{ID: p.ID, ExpectedVersion: p.ExpectedVersion, Name: p.Name, Audit: p.Audit,
			apply: func(cur store.Schedule, name string) error {
				next := cur
				next.Name = name
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
				return nil
			}})
		return err
	})
	return out, err
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, p store.DeleteScheduleParams) (store.Schedule, error) {
	defer s.timed("delete_schedule", time.Now())
	var out store.Schedule
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = schedules.remove(ctx, tx, change[store.Schedule]{ID: p.ID, ExpectedVersion: p.ExpectedVersion, Audit: p.Audit,
			apply: func(store.Schedule, string) error {
				if _, err := tx.ExecContext(ctx, `DELETE FROM studio_schedule_slots WHERE schedule_id = ?`, p.ID); err != nil {
					return fmt.Errorf("delete schedule slots: %w", err)
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM studio_schedules WHERE id = ?`, p.ID); err != nil {
					return fmt.Errorf("delete schedule: %w", err)
				}
				return nil
			}})
		return err
	})
	return out, err
}

// DueSchedules implements store.ScheduleStore.
func (s *Store) DueSchedules(ctx context.Context, p store.DueSchedulesParams) ([]store.Schedule, error) {
	defer s.timed("due_schedules", time.Now())
	return collect(ctx, s.r, "due schedules", scanSchedule, `SELECT `+scheduleCols+scheduleFrom+`
		WHERE s.enabled = 1 AND s.next_run_at IS NOT NULL AND s.next_run_at <= ?
		ORDER BY s.next_run_at, s.id LIMIT ?`, ts(p.Now), limitOr(p.Limit, 100))
}

// FireSchedule implements store.ScheduleStore.
func (s *Store) FireSchedule(ctx context.Context, p store.FireScheduleParams) (store.FireScheduleResult, error) {
	defer s.timed("fire_schedule", time.Now())
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
		tx.changed(store.ChangeScheduleChanged, p.ScheduleID)
		out.Schedule, err = getSchedule(ctx, tx, "id", p.ScheduleID)
		return err
	})
	return out, err
}
