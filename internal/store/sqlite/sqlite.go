// Package sqlite is StateDB on SQLite (modernc.org/sqlite, pure Go): the
// embedded default backend. One writer connection serialises writes; a small
// reader pool serves reads concurrently under WAL. synchronous=FULL makes a
// frame durable before any stream sees it (docs/design.md §3). The queries are
// sqlstore's, shared with the PostgreSQL backend; this package opens the
// file, supplies sqlstore's dialect and keeps the file's own upkeep.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

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
	path string
	w    *sql.DB // one connection: every write transaction
	r    *sql.DB // reader pool
}

var _ store.Store = (*Store)(nil)

// WriterCacheKiB bounds the writer connection's page cache (SQLite's
// default is 2 000 KiB per connection, which the readers keep).
const WriterCacheKiB = 32 << 10

// Option changes how Open sets up the connections.
type Option func(*options)

type options struct {
	autocheckpoint *int
}

// WALAutocheckpoint sets PRAGMA wal_autocheckpoint on every connection:
// after a commit that leaves at least pages pages in the WAL, SQLite
// copies them into the database file (a PASSIVE checkpoint). 0 turns
// that off, leaving checkpoints to a replication tool such as Litestream,
// which checkpoints under its own lock. Without the option SQLite's
// default (1000 pages) applies.
func WALAutocheckpoint(pages int) Option {
	return func(o *options) { o.autocheckpoint = &pages }
}

// Open opens (creating if needed) the database file at path. It does not
// migrate; call Migrate. A new file is created with mode 0600; SQLite gives
// its -wal and -shm files the database file's mode.
func Open(path string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	if o.autocheckpoint != nil {
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", max(0, *o.autocheckpoint)))
	}
	q.Set("_txlock", "immediate")
	// A SQLite URI: the path is escaped so that '?', '#' and '%' in a data
	// directory name cannot cut it short or turn into parameters.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String()
	// The writer keeps its statement and savepoint journals in memory
	// (temp_store MEMORY): every page a batch's statements change is
	// copied there first, and a file (what SQLite spills to past 64 KiB)
	// cost a write system call per page, a sixth of the writer's time.
	// They hold the batch's changed pages at most, and vanish at its
	// commit; durability is the WAL's. Vacuum turns it back to a file.
	wq := url.Values{}
	for k, v := range q {
		wq[k] = v
	}
	wq.Add("_pragma", "temp_store(MEMORY)")
	// The writer's page cache holds the pages appends land on: with many
	// conversations streaming, each append touches its conversation's own
	// index leaf, and SQLite's default 2 MiB cache (500 pages) no longer
	// holds them. Each miss was a pread and each batch spilled dirty pages
	// to the WAL before its commit (a sixth of the writer at 1 000
	// conversations; BenchmarkGroupCommitGrown). SQLite takes the pages
	// as it needs them: an idle daemon does not hold the bound.
	wq.Add("_pragma", fmt.Sprintf("cache_size(%d)", -WriterCacheKiB))
	wdsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: wq.Encode()}).String()
	w, err := sql.Open("sqlite", wdsn)
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
	return &Store{Store: sqlstore.New(sqlstore.Config{Writer: w, Reader: r, Dialect: dialect{}, GroupCommit: true}), path: path, w: w, r: r}, nil
}

// createPrivate creates an empty file at path, readable by its owner only,
// unless it exists. SQLite takes an empty file for a new database.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Migrate applies pending migrations and returns the schema version.
func (s *Store) Migrate(ctx context.Context, now time.Time) (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	return sqlstore.Migrate(ctx, s.w, dialect{}, ms, now)
}

// Exclusive runs fn: one daemon holds a SQLite file (the data directory's
// lock), so nothing else runs beside it.
func (s *Store) Exclusive(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// dialect is SQLite's part of sqlstore. The one writer connection runs
// write transactions one at a time, so rows need no locks and no
// transaction meets another's to retry; streams wake on this process's
// commits alone, through sqlstore's in-process signals, as nothing else
// tells them of a commit.
type dialect struct{}

var _ sqlstore.Dialect = dialect{}

func (dialect) Rebind(query string) string                             { return query }
func (dialect) Lock(sqlstore.LockMode, ...string) string               { return "" }
func (dialect) Snapshot() *sql.TxOptions                               { return &sql.TxOptions{ReadOnly: true} }
func (dialect) Notify(context.Context, *sql.Tx, string) error          { return nil }
func (dialect) Control(context.Context, sqlstore.Execer, string) error { return nil }
func (dialect) Retryable(error) bool                                   { return false }
func (dialect) JSON(expr string) string                                { return expr }

// SearchMatch: the FTS5 index over the search documents.
func (dialect) SearchMatch() string {
	return `SELECT d.conversation_id FROM studio_operator_search s
		JOIN studio_operator_search_docs d ON d.id = s.rowid WHERE studio_operator_search MATCH ?`
}

// SearchQuery: every term as a quoted prefix, all required.
func (dialect) SearchQuery(terms []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = `"` + t + `"*`
	}
	return strings.Join(q, " ")
}
