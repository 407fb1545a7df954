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

// Instances, leases and the ownership of work (store.InstanceStore). Every
// hand-over is a compare-and-set on the owner column of the row it moves,
// under the row's lock: whichever daemons reap, claim or renew at the same
// time, one wins and the others see conflict.
//
// A reaping is a row of studio_instance_reaps, inserted by the reaper
// after it read the instance's lease without a lock: the stalled daemon's
// sessions may hold its instance row (a renewal frozen half-way) for as
// long as they hang, and nobody may wait for them. studio_instances.reaped_at
// follows when the row is free; an instance is reaped when either says so.

// instanceCols are an instance's columns, its reaping from either place.
const instanceCols = `id, address, pid, version, started_at, heartbeat_at, lease_expires_at, stopped_at,
	COALESCE(reaped_at, (SELECT r.reaped_at FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id))`

// notReaped is the condition "the studio_instances row is neither reaped
// nor stopped".
const notReaped = `reaped_at IS NULL AND stopped_at IS NULL
	AND NOT EXISTS (SELECT 1 FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id)`

func scanInstance(row scanner) (store.Instance, error) {
	var i store.Instance
	var started, heartbeat, expires float64
	var stopped, reaped sql.NullFloat64
	if err := row.Scan(&i.ID, &i.Address, &i.PID, &i.Version, &started, &heartbeat, &expires, &stopped, &reaped); err != nil {
		return i, err
	}
	i.StartedAt, i.HeartbeatAt, i.LeaseExpiresAt = fromTS(started), fromTS(heartbeat), fromTS(expires)
	i.StoppedAt, i.ReapedAt = nullTS(stopped), nullTS(reaped)
	return i, nil
}

func getInstance(ctx context.Context, q querier, id string) (store.Instance, error) {
	i, err := scanInstance(q.QueryRowContext(ctx, `SELECT `+instanceCols+` FROM studio_instances WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return i, notFound("instance", id)
	}
	if err != nil {
		return i, fmt.Errorf("get instance: %w", err)
	}
	return i, nil
}

// nullIfEmpty stores "" as NULL: an owner column with no owner.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// RegisterInstance implements store.InstanceStore.
func (s *Store) RegisterInstance(ctx context.Context, p store.RegisterInstanceParams) (store.Instance, error) {
	defer s.timed("register_instance", time.Now())
	in := p.Instance
	if in.ID == "" {
		return in, protocol.Errorf(protocol.Validation, "an instance needs an id")
	}
	var out store.Instance
	err := s.txn(ctx, func(tx *writeTx) error {
		// An id is registered once; a registration tried again after its
		// commit's answer was lost finds its own row.
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_instances
			(id, address, pid, version, started_at, heartbeat_at, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			in.ID, in.Address, in.PID, in.Version, ts(in.StartedAt), ts(in.HeartbeatAt), ts(in.LeaseExpiresAt)); err != nil {
			return fmt.Errorf("register instance: %w", err)
		}
		var err error
		out, err = getInstance(ctx, tx, in.ID)
		return err
	})
	return out, err
}

// errLeaseLost is RenewLease's answer for an instance that was reaped.
func errLeaseLost(id string) error {
	return protocol.Errorf(protocol.Conflict, "instance %s lost its lease: another daemon took its work over", id).With("instance", id)
}

// RenewLease implements store.InstanceStore. Only the instance's own
// daemon writes its lease; a reaper reads it without a lock and records
// the reaping elsewhere, so neither waits for the other. A renewal and a
// reaping that race may both commit (the renewal read the instance
// unreaped, the reaper the lease expired): the reaping wins, every fenced
// write of the instance is refused, and its next renewal fails. The
// renewal reads the instance again after its commit, so that it answers
// lost for every reaping that committed before it (only a reaping whose
// commit came later still slips by, until the next renewal).
func (s *Store) RenewLease(ctx context.Context, p store.RenewLeaseParams) (store.Instance, error) {
	defer s.timed("renew_lease", time.Now())
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE studio_instances SET heartbeat_at = ?, lease_expires_at = ?
			WHERE id = ? AND `+notReaped, ts(p.Now), ts(p.ExpiresAt), p.ID)
		if err != nil {
			return fmt.Errorf("renew lease: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errLeaseLost(p.ID)
		}
		return nil
	})
	if err != nil {
		return store.Instance{}, err
	}
	out, err := getInstance(ctx, s.w, p.ID)
	if err == nil && out.ReapedAt != nil {
		return out, errLeaseLost(p.ID)
	}
	return out, err
}

// StopInstance implements store.InstanceStore.
func (s *Store) StopInstance(ctx context.Context, p store.StopInstanceParams) error {
	defer s.timed("stop_instance", time.Now())
	return s.txn(ctx, func(tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `UPDATE studio_instances SET stopped_at = ?, lease_expires_at = ?
			WHERE id = ? AND stopped_at IS NULL`, ts(p.Now), ts(p.Now), p.ID)
		if err != nil {
			return fmt.Errorf("stop instance: %w", err)
		}
		return nil
	})
}

// ListInstances implements store.InstanceStore.
func (s *Store) ListInstances(ctx context.Context, p store.ListInstancesParams) ([]store.Instance, error) {
	defer s.timed("list_instances", time.Now())
	return collect(ctx, s.r, "list instances", scanInstance, `SELECT `+instanceCols+` FROM studio_instances
		ORDER BY started_at DESC, id LIMIT ?`, limitOr(p.Limit, 100))
}

// ReapInstances implements store.InstanceStore. It takes no lock the
// reaped daemon may hold: the leases are read as committed, each reaping
// is an insert whose condition reads the lease again, and reaped_at on
// the instance's own row is set only where no session holds the row
// (SKIP LOCKED; a later look sets the rest).
func (s *Store) ReapInstances(ctx context.Context, p store.ReapInstancesParams) ([]store.Instance, error) {
	defer s.timed("reap_instances", time.Now())
	var out []store.Instance
	err := s.txn(ctx, func(tx *writeTx) error {
		out = nil
		// A stopped instance ended its lease itself: nothing to take over
		// by force (OrphanedWork still finds what it left).
		query := `SELECT ` + instanceCols + ` FROM studio_instances WHERE ` + notReaped + ` AND id <> ?`
		args := []any{p.Except}
		expired := ""
		if !p.All {
			expired = ` AND lease_expires_at < ?`
			args = append(args, ts(p.Now))
		}
		found, err := collect(ctx, tx.conn, "reap instances", scanInstance, query+expired+` ORDER BY id`, args...)
		if err != nil {
			return err
		}
		for _, in := range found {
			cond := []any{ts(p.Now), p.Except, in.ID}
			if !p.All {
				cond = append(cond, ts(p.Now))
			}
			res, err := tx.ExecContext(ctx, `INSERT INTO studio_instance_reaps (instance_id, reaped_at, reaped_by)
				SELECT id, ?, ? FROM studio_instances WHERE id = ? AND `+notReaped+expired+`
				ON CONFLICT (instance_id) DO NOTHING`, cond...)
			if err != nil {
				return fmt.Errorf("reap instance: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				continue // renewed, stopped or reaped meanwhile
			}
			now := p.Now
			in.ReapedAt = &now
			out = append(out, in)
		}
		// The instances' own rows follow, where no session holds them.
		if _, err := tx.ExecContext(ctx, `UPDATE studio_instances SET reaped_at = (SELECT r.reaped_at FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id)
			WHERE id IN (SELECT id FROM studio_instances WHERE reaped_at IS NULL
				AND EXISTS (SELECT 1 FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id)`+tx.locks.skipLocked+`)`); err != nil {
			return fmt.Errorf("reap instances: %w", err)
		}
		return nil
	})
	return out, err
}

// PurgeInstances implements store.InstanceStore.
func (s *Store) PurgeInstances(ctx context.Context, p store.PurgeInstancesParams) (int64, error) {
	defer s.timed("purge_instances", time.Now())
	var n int64
	err := s.txn(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM studio_instances
			WHERE COALESCE(reaped_at, (SELECT r.reaped_at FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id), stopped_at) < ?
			AND NOT EXISTS (SELECT 1 FROM studio_operator_turns t WHERE t.owner_instance = studio_instances.id)
			AND NOT EXISTS (SELECT 1 FROM studio_operator_proposals p WHERE p.owner_instance = studio_instances.id AND p.status = 'executing')
			AND NOT EXISTS (SELECT 1 FROM studio_runs r WHERE r.owner_instance = studio_instances.id AND r.status = 'running')`,
			ts(p.Before))
		if err != nil {
			return fmt.Errorf("purge instances: %w", err)
		}
		n, _ = res.RowsAffected()
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_instance_reaps
			WHERE NOT EXISTS (SELECT 1 FROM studio_instances i WHERE i.id = studio_instance_reaps.instance_id)`); err != nil {
			return fmt.Errorf("purge instances: %w", err)
		}
		return nil
	})
	return n, err
}

// reaped is the condition "the owner column c names an instance that
// lost its lease or stopped": work left there is nobody's.
func reaped(c string) string {
	return `(` + c + ` IN (SELECT id FROM studio_instances WHERE reaped_at IS NOT NULL OR stopped_at IS NOT NULL)
		OR ` + c + ` IN (SELECT instance_id FROM studio_instance_reaps))`
}

// OrphanedWork implements store.InstanceStore.
func (s *Store) OrphanedWork(ctx context.Context, p store.OrphanedWorkParams) (store.OrphanedWork, error) {
	defer s.timed("orphaned_work", time.Now())
	var w store.OrphanedWork
	limit := limitOr(p.Limit, 100)
	tx, err := s.readTx(ctx)
	if err != nil {
		return w, fmt.Errorf("orphaned work: %w", err)
	}
	defer tx.Rollback()
	w.Turns, err = collect(ctx, tx.conn, "orphaned turns", scanTurn, `SELECT `+turnCols+` FROM studio_operator_turns
		WHERE status IN ('queued', 'running', 'awaiting_confirmation') AND (`+reaped("owner_instance")+`
			OR (owner_instance IS NULL AND status = 'running'))
		ORDER BY created_at, request_id LIMIT ?`, limit)
	if err != nil {
		return w, err
	}
	w.Proposals, err = collect(ctx, tx.conn, "orphaned proposals", scanProposal, `SELECT `+proposalCols+` FROM studio_operator_proposals p
		WHERE status = 'executing' AND `+reaped("owner_instance")+`
		AND NOT EXISTS (SELECT 1 FROM studio_operator_turns t WHERE t.request_id = p.request_id
			AND t.owner_instance = p.owner_instance AND t.status IN ('queued', 'running', 'awaiting_confirmation'))
		ORDER BY created_at, id LIMIT ?`, limit)
	if err != nil {
		return w, err
	}
	w.Runs, err = collect(ctx, tx.conn, "orphaned runs", scanRun, `SELECT `+runCols+` FROM studio_runs
		WHERE status = 'running' AND (`+reaped("owner_instance")+` OR owner_instance IS NULL)
		ORDER BY created_at, id LIMIT ?`, limit)
	return w, err
}

// sameOwner is the condition "the owner column c is from" ("" for none).
func sameOwner(c, from string) (string, []any) {
	if from == "" {
		return c + ` IS NULL`, nil
	}
	return c + ` = ?`, []any{from}
}

// AdoptTurn implements store.InstanceStore.
func (s *Store) AdoptTurn(ctx context.Context, p store.AdoptTurnParams) (store.Turn, error) {
	defer s.timed("adopt_turn", time.Now())
	var out store.Turn
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := lockTurn(ctx, tx, p.RequestID)
		if err != nil {
			return err
		}
		if cur.Status.Terminal() || cur.Owner != p.From {
			return protocol.Errorf(protocol.Conflict, "turn %s is %s, owned by %q, not %q's", p.RequestID, cur.Status, cur.Owner, p.From).
				With("status", string(cur.Status))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET owner_instance = ?, owner_epoch = owner_epoch + 1 WHERE request_id = ?`,
			nullIfEmpty(p.To), p.RequestID); err != nil {
			return fmt.Errorf("adopt turn: %w", err)
		}
		for _, id := range p.Proposals {
			if err := disown(ctx, tx, id, p.From, p.To, nil); err != nil && !protocol.IsCode(err, protocol.Conflict) {
				return err
			}
		}
		tx.control(store.TurnKey(p.RequestID))
		out, err = getTurn(ctx, tx, p.RequestID)
		return err
	})
	return out, err
}

// DisownProposal implements store.InstanceStore.
func (s *Store) DisownProposal(ctx context.Context, p store.DisownProposalParams) (store.Proposal, error) {
	defer s.timed("disown_proposal", time.Now())
	var out store.Proposal
	err := s.txn(ctx, func(tx *writeTx) error {
		if err := disown(ctx, tx, p.ID, p.From, p.To, p.Audit); err != nil {
			return err
		}
		var err error
		out, err = getProposal(ctx, tx, p.ID)
		return err
	})
	return out, err
}

// disown takes an executing proposal from its (reaped) owner to to: the
// new epoch fences the old owner's execution off, so whether it executed
// (executed_at, set in the command's own transaction) is final. With no
// new owner, its indeterminate audit row says so, and reconcile_proposal
// settles it.
func disown(ctx context.Context, tx *writeTx, id, from, to string, audit *store.AppendAdminEventParams) error {
	cond, args := sameOwner("owner_instance", from)
	res, err := tx.ExecContext(ctx, `UPDATE studio_operator_proposals SET owner_instance = ?, owner_epoch = owner_epoch + 1
		WHERE id = ? AND status = 'executing' AND `+cond, append([]any{nullIfEmpty(to), id}, args...)...)
	if err != nil {
		return fmt.Errorf("disown proposal: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return protocol.Errorf(protocol.Conflict, "proposal %s is not executing for %q", id, from)
	}
	if audit == nil {
		return nil
	}
	_, err = appendAdminEvent(ctx, tx, *audit)
	return err
}

// ClaimTurn implements store.InstanceStore.
func (s *Store) ClaimTurn(ctx context.Context, p store.ClaimTurnParams) (store.Turn, bool, error) {
	defer s.timed("claim_turn", time.Now())
	var out store.Turn
	var ok bool
	err := s.txn(ctx, func(tx *writeTx) error {
		ok = false
		var id string
		err := tx.QueryRowContext(ctx, `SELECT request_id FROM studio_operator_turns
			WHERE status = 'queued' AND queue_order IS NULL AND (owner_instance IS NULL OR owner_instance <> ?)
			ORDER BY created_at, request_id LIMIT 1`+tx.locks.skipLocked, p.Instance).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim turn: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = 'running', started_at = ?, owner_instance = ?, owner_epoch = owner_epoch + 1
			WHERE request_id = ? AND status = 'queued' AND queue_order IS NULL`, ts(p.Now), nullIfEmpty(p.Instance), id)
		if err != nil {
			return fmt.Errorf("claim turn: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		tx.control(store.TurnKey(id)) // its submitter stops waiting for it
		out, err = getTurn(ctx, tx, id)
		ok = err == nil
		return err
	})
	return out, ok, err
}

// ReleaseTurn implements store.InstanceStore.
func (s *Store) ReleaseTurn(ctx context.Context, p store.ReleaseTurnParams) (store.Turn, error) {
	defer s.timed("release_turn", time.Now())
	var out store.Turn
	err := s.txn(ctx, func(tx *writeTx) error {
		cond, args := sameOwner("owner_instance", p.From)
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET owner_instance = NULL, owner_epoch = owner_epoch + 1
			WHERE request_id = ? AND status = 'queued' AND queue_order IS NULL AND `+cond, append([]any{p.RequestID}, args...)...)
		if err != nil {
			return fmt.Errorf("release turn: %w", err)
		}
		out, err = getTurn(ctx, tx, p.RequestID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return protocol.Errorf(protocol.Conflict, "turn %s is %s, owned by %q", p.RequestID, out.Status, out.Owner).
				With("status", string(out.Status))
		}
		tx.control(store.TurnsQueued)
		return nil
	})
	return out, err
}

// ReapRun implements store.InstanceStore.
func (s *Store) ReapRun(ctx context.Context, p store.ReapRunParams) (store.Run, error) {
	defer s.timed("reap_run", time.Now())
	var out store.Run
	err := s.txn(ctx, func(tx *writeTx) error {
		cond, args := sameOwner("owner_instance", p.From)
		res, err := tx.ExecContext(ctx, `UPDATE studio_runs SET status = 'failed', error_code = ?, error_message = ?,
			ended_at = ?, updated_at = ?, version = version + 1, owner_instance = NULL, owner_epoch = owner_epoch + 1
			WHERE id = ? AND status = 'running' AND `+cond,
			append([]any{p.ErrorCode, p.ErrorMessage, ts(p.Now), ts(p.Now), p.ID}, args...)...)
		if err != nil {
			return fmt.Errorf("reap run: %w", err)
		}
		out, err = getRun(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return protocol.Errorf(protocol.Conflict, "run %s is %s, owned by %q", p.ID, out.Status, out.Owner).
				With("status", string(out.Status))
		}
		tx.control(store.RunKey(p.ID))
		tx.changed(store.ChangeRunChanged, p.ID)
		return enqueueRunFailed(ctx, tx, out, p.Now)
	})
	return out, err
}

// ActiveWork implements store.InstanceStore.
func (s *Store) ActiveWork(ctx context.Context, p store.ActiveWorkParams) (store.ActiveWork, error) {
	defer s.timed("active_work", time.Now())
	var w store.ActiveWork
	limit := limitOr(p.Limit, 100)
	tx, err := s.readTx(ctx)
	if err != nil {
		return w, fmt.Errorf("active work: %w", err)
	}
	defer tx.Rollback()
	w.Turns, err = collect(ctx, tx.conn, "active turns", scanTurn, `SELECT `+turnCols+` FROM studio_operator_turns
		WHERE status IN ('queued', 'running', 'awaiting_confirmation') ORDER BY created_at, request_id LIMIT ?`, limit)
	if err != nil {
		return w, err
	}
	w.Runs, err = collect(ctx, tx.conn, "active runs", scanRun, `SELECT `+runCols+` FROM studio_runs
		WHERE status IN ('queued', 'running') ORDER BY created_at, id LIMIT ?`, limit)
	return w, err
}

// ControlSignal implements store.InstanceStore.
func (s *Store) ControlSignal(key string) <-chan struct{} { return s.control.Wait(key) }

// Announce implements store.InstanceStore.
func (s *Store) Announce(ctx context.Context, key string) error {
	defer s.timed("announce", time.Now())
	s.control.Notify(key)
	if err := s.d.Control(ctx, s.writer, key); err != nil {
		return fmt.Errorf("announce %s: %w", key, err)
	}
	return nil
}
