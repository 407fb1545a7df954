package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/studio/operator/internal/store"
)

// appChange is one application change a write transaction records.
type appChange struct{ typ, id string }

// changed records that the transaction changes an application resource:
// its commit appends the change to the log (store.AppChangeStore) and
// wakes the change streams of every process.
func (tx *writeTx) changed(typ, id string) {
	tx.changes = append(tx.changes, appChange{typ, id})
}

// writeChanges appends the transaction's changes to the log, numbered from
// the counter row. It runs last in the transaction, so the counter's row
// lock is held only from there to the commit and is the last lock taken
// (no lock order cycle with the rows the transaction changed).
func writeChanges(ctx context.Context, tx *writeTx) error {
	if len(tx.changes) == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `UPDATE studio_app_change_counter SET last = last + ? WHERE id = 1 RETURNING last`,
		len(tx.changes)).Scan(&last); err != nil {
		return fmt.Errorf("record changes: %w", err)
	}
	now := ts(time.Now())
	first := last - int64(len(tx.changes)) + 1
	for i, c := range tx.changes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_app_changes (seq, type, resource_id, created_at) VALUES (?, ?, ?, ?)`,
			first+int64(i), c.typ, c.id, now); err != nil {
			return fmt.Errorf("record changes: %w", err)
		}
	}
	// Prune now and then, by sequence: the log keeps the newest
	// AppChangesKept changes.
	if first/500 != (last+1)/500 || len(tx.changes) >= 500 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_app_changes WHERE seq <= ?`, last-store.AppChangesKept); err != nil {
			return fmt.Errorf("prune changes: %w", err)
		}
	}
	tx.control(store.AppChangesKey)
	return nil
}

// ListAppChanges implements store.AppChangeStore.
func (s *Store) ListAppChanges(ctx context.Context, after int64, limit int) ([]store.AppChange, error) {
	defer s.timed("list_app_changes", time.Now())
	return collect(ctx, conn{db: s.reader, d: s.d}, "list changes", func(row scanner) (store.AppChange, error) {
		var c store.AppChange
		var at float64
		err := row.Scan(&c.Seq, &c.Type, &c.ResourceID, &at)
		c.At = fromTS(at)
		return c, err
	}, `SELECT seq, type, resource_id, created_at FROM studio_app_changes WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
}

// AppChangesRange implements store.AppChangeStore.
func (s *Store) AppChangesRange(ctx context.Context) (oldest, newest int64, err error) {
	var lo sql.NullInt64
	err = s.reader.QueryRowContext(ctx, s.d.Rebind(`SELECT (SELECT MIN(seq) FROM studio_app_changes), last FROM studio_app_change_counter WHERE id = 1`)).Scan(&lo, &newest)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("changes range: %w", err)
	}
	if !lo.Valid {
		return newest + 1, newest, nil // none kept: every change up to newest is gone
	}
	return lo.Int64, newest, nil
}
