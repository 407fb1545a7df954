package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/studio/operator/internal/store"
)

// The migration runner: the backends embed their own migrations
// (store.LoadMigrations) and apply them with it.

// Migrate applies the migrations newer than the database's version, each in
// its own transaction, and records each in schema_migrations with now as
// applied_at. d is the engine's dialect: its placeholders.
func Migrate(ctx context.Context, db *sql.DB, d Dialect, ms []store.Migration, now time.Time) (int, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at REAL NOT NULL)`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := CurrentVersion(ctx, db)
	if err != nil {
		return 0, err
	}
	if current > len(ms) {
		return current, fmt.Errorf("database schema version %d is newer than this binary's %d", current, len(ms))
	}
	insert := d.Rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`)
	for _, m := range ms[current:] {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return current, fmt.Errorf("migration %04d: begin: %w", m.Version, err)
		}
		if p, ok := d.(migrationPreamble); ok {
			if _, err := tx.ExecContext(ctx, p.MigrationPreamble()); err != nil {
				_ = tx.Rollback()
				return current, fmt.Errorf("migration %04d: %w", m.Version, err)
			}
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			_ = tx.Rollback()
			return current, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, insert, m.Version, m.Name, ts(now)); err != nil {
			_ = tx.Rollback()
			return current, fmt.Errorf("migration %04d: record: %w", m.Version, err)
		}
		if err := tx.Commit(); err != nil {
			return current, fmt.Errorf("migration %04d: commit: %w", m.Version, err)
		}
		current = m.Version
	}
	return current, nil
}

// migrationPreamble is a dialect with statements that run first in each
// migration's transaction (PostgreSQL: no session timeouts for schema
// changes, which may wait for other daemons' transactions).
type migrationPreamble interface{ MigrationPreamble() string }

// CurrentVersion is the highest applied migration, 0 for a new database.
func CurrentVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// MigrationsAppliedAt lists, in order, the migrations recorded as applied
// at `at`: those a Migrate call given `at` as its now applied (none when
// the schema was current, or when another daemon applied them first).
func (s *Store) MigrationsAppliedAt(ctx context.Context, at time.Time) ([]store.Migration, error) {
	rows, err := s.reader.QueryContext(ctx, s.d.Rebind(`SELECT version, name FROM schema_migrations WHERE applied_at = ? ORDER BY version`), ts(at))
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	var out []store.Migration
	for rows.Next() {
		var m store.Migration
		if err := rows.Scan(&m.Version, &m.Name); err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
