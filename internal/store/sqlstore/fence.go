package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/studio/operator/internal/store"
)

// checkFence refuses a write transaction whose writer lost what it owned
// (store.Fence): its instance was reaped or stopped, or the proposal it
// executes was taken from it; or, with a Lease check, whose writer cannot
// prove its lease current (a transient refusal: it may renew). It runs
// first in the transaction. The proposal's row stays locked until the
// commit, so a takeover (which rewrites that row) and the command's own
// write are ordered one way or the other, never both. The instance's row
// is read, not locked: a reaping must never wait on a session of the
// daemon it reaps (which may hang for as long as the daemon does), and
// whatever the writer's transaction changes is ordered against the
// takeover by the rows both lock.
func checkFence(ctx context.Context, tx *writeTx, f store.Fence) error {
	if f.Lease != nil {
		if err := f.Lease(); err != nil {
			return store.LeaseUnproven(f.Instance, err)
		}
	}
	if f.ProposalID != "" {
		if tx.locks.rows() {
			// The order every writer keeps: its conversation first.
			var convID string
			err := tx.QueryRowContext(ctx, `SELECT conversation_id FROM studio_operator_proposals WHERE id = ?`, f.ProposalID).Scan(&convID)
			if errors.Is(err, sql.ErrNoRows) {
				return store.Fenced("proposal %s is gone", f.ProposalID)
			}
			if err != nil {
				return fmt.Errorf("check fence: %w", err)
			}
			if _, err := lockConversation(ctx, tx, convID); err != nil {
				return err
			}
		}
		var status string
		var owner sql.NullString
		var epoch int64
		var executed sql.NullFloat64
		err := tx.QueryRowContext(ctx, `SELECT status, owner_instance, owner_epoch, executed_at FROM studio_operator_proposals WHERE id = ?`+tx.locks.update,
			f.ProposalID).Scan(&status, &owner, &epoch, &executed)
		if errors.Is(err, sql.ErrNoRows) {
			return store.Fenced("proposal %s is gone", f.ProposalID)
		}
		if err != nil {
			return fmt.Errorf("check fence: %w", err)
		}
		if status != string(store.ProposalExecuting) || owner.String != f.Instance || epoch != f.ProposalEpoch {
			return store.Fenced("proposal %s is %s, owned by %q at epoch %d, no longer by instance %s at epoch %d",
				f.ProposalID, status, owner.String, epoch, f.Instance, f.ProposalEpoch).
				With("proposalId", f.ProposalID).With("instance", f.Instance)
		}
		if f.Execute && executed.Valid {
			return store.AlreadyExecuted(f.ProposalID)
		}
	}
	return instanceLive(ctx, tx, f.Instance)
}

// markExecuted records, at the end of a confirmed command's own write
// (Fence.Execute), that it executed and which audit row it appended: the
// same transaction commits both or neither.
func markExecuted(ctx context.Context, tx *writeTx, f store.Fence) error {
	var audit any
	if len(tx.audited) > 0 {
		audit = tx.audited[0]
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_proposals SET executed_at = ?, executed_audit_id = ? WHERE id = ?`,
		ts(f.Now), audit, f.ProposalID); err != nil {
		return fmt.Errorf("mark executed: %w", err)
	}
	return nil
}

// instanceLive refuses an instance that was reaped or stopped (or is
// unknown): it lost its lease, and with it everything it owned. It reads
// the instance without a lock (see checkFence).
func instanceLive(ctx context.Context, tx *writeTx, id string) error {
	var reaped, stopped sql.NullFloat64
	err := tx.QueryRowContext(ctx, `SELECT COALESCE(reaped_at, (SELECT r.reaped_at FROM studio_instance_reaps r WHERE r.instance_id = studio_instances.id)),
		stopped_at FROM studio_instances WHERE id = ?`, id).Scan(&reaped, &stopped)
	if errors.Is(err, sql.ErrNoRows) {
		return instanceRefused(id, false, reaped, stopped)
	}
	if err != nil {
		return fmt.Errorf("check fence: %w", err)
	}
	return instanceRefused(id, true, reaped, stopped)
}

// instanceRefused is instanceLive's answer for the instance's row as read
// (found false: there is none): nil when the instance is live.
func instanceRefused(id string, found bool, reaped, stopped sql.NullFloat64) error {
	switch {
	case !found:
		return store.Fenced("instance %s is not registered", id).With("instance", id)
	case reaped.Valid:
		return store.Fenced("instance %s lost its lease: another daemon took its work over", id).With("instance", id)
	case stopped.Valid:
		return store.Fenced("instance %s has stopped", id).With("instance", id)
	}
	return nil
}
