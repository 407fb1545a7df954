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
// executes was taken from it. It runs first in the transaction and locks
// what it checked until the commit — the instance row against a reaping,
// the proposal row against a takeover — so the check still holds when
// the transaction's writes land.
func checkFence(ctx context.Context, tx *writeTx, f store.Fence) error {
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
		if f.Execute {
			if executed.Valid {
				return store.AlreadyExecuted(f.ProposalID)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_proposals SET executed_at = ? WHERE id = ?`, ts(f.Now), f.ProposalID); err != nil {
				return fmt.Errorf("check fence: %w", err)
			}
		}
	}
	lock := ""
	if f.ProposalID != "" || f.Hold {
		lock = tx.locks.share
	}
	return instanceLive(ctx, tx, f.Instance, lock)
}

// instanceLive refuses an instance that was reaped or stopped (or is
// unknown): it lost its lease, and with it everything it owned. lock is
// the row lock to hold until the commit ("" for none).
func instanceLive(ctx context.Context, tx *writeTx, id, lock string) error {
	var reaped, stopped sql.NullFloat64
	err := tx.QueryRowContext(ctx, `SELECT reaped_at, stopped_at FROM studio_instances WHERE id = ?`+lock, id).Scan(&reaped, &stopped)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Fenced("instance %s is not registered", id).With("instance", id)
	case err != nil:
		return fmt.Errorf("check fence: %w", err)
	case reaped.Valid:
		return store.Fenced("instance %s lost its lease: another daemon took its work over", id).With("instance", id)
	case stopped.Valid:
		return store.Fenced("instance %s has stopped", id).With("instance", id)
	}
	return nil
}
