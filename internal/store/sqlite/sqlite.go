// Package sqlite is StateDB on SQLite (modernc.org/sqlite, pure Go): the
// embedded default backend. One writer connection serialises writes; a small
// reader pool serves reads concurrently under WAL. synchronous=FULL makes a
// frame durable before any stream sees it (ADR D2).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations are this backend's embedded schema steps.
func Migrations() ([]store.Migration, error) { return store.LoadMigrations(migrationFS, "migrations") }

// Store is StateDB on one SQLite file.
type Store struct {
	*sqlstore.Store
	path    string
	w       *sql.DB // one connection: every write transaction
	r       *sql.DB // reader pool
	signals store.Signals
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path. It does not
// migrate; call Migrate.
func Open(path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	// A SQLite URI: the path is escaped so that '?', '#' and '%' in a data
	// directory name cannot cut it short or turn into parameters.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.Ping(); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s := &Store{path: path, w: w, r: r}
	s.Store = sqlstore.New(sqlstore.Config{Writer: w, Reader: r, Dialect: dialect{}, Signals: &s.signals})
	return s, nil
}

// dialect is SQLite's part of sqlstore. The one writer connection runs
// write transactions one at a time, so rows need no locks and no
// transaction meets another's to retry; only this process reads the file's
// commits, so the in-process signals are all the notification there is.
type dialect struct{}

func (dialect) Rebind(query string) string                    { return query }
func (dialect) Lock(sqlstore.LockMode, ...string) string      { return "" }
func (dialect) Snapshot() *sql.TxOptions                      { return &sql.TxOptions{ReadOnly: true} }
func (dialect) Notify(context.Context, *sql.Tx, string) error { return nil }
func (dialect) Retryable(error) bool                          { return false }

// Migrate applies pending migrations and returns the schema version.
func (s *Store) Migrate(ctx context.Context, now time.Time) (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	return store.Migrate(ctx, s.w, ms, ts(now), "?")
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// txn runs fn in one write transaction and, after commit, wakes the streams
// of the conversations fn reported through touch.
func (s *Store) txn(ctx context.Context, fn func(tx *sql.Tx, touch func(convID string)) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var touched []string
	if err := fn(tx, func(id string) { touched = append(touched, id) }); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, id := range touched {
		s.signals.Notify(id)
	}
	return nil
}

func ts(t time.Time) float64 { return protocol.Timestamp(t) }

func fromTS(f float64) time.Time { return protocol.Time(f) }

func nullTS(f sql.NullFloat64) *time.Time {
	if !f.Valid {
		return nil
	}
	t := fromTS(f.Float64)
	return &t
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

func tsOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}
