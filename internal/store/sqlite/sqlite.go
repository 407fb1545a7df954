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
	"slices"
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
	w    *sql.DB       // one connection: every write transaction
	r    *sql.DB       // reader pool
	cp   *checkpointer // nil: checkpoints are the writer's (or another tool's)
}

var _ store.Store = (*Store)(nil)

// Option changes how Open sets up the connections.
type Option func(*options)

type options struct {
	autocheckpoint *int
	// open opens a connection pool on a DSN (tests wrap the driver).
	open func(dsn string) (*sql.DB, error)
	// checkpointEvery is the checkpointer's trickle delay (tests).
	checkpointEvery time.Duration
}

// WALAutocheckpoint sets the checkpoint limit, pages (1000 without the
// option, SQLite's default): checkpoints are a connection of the store's
// own, once runPages times pages were appended to the WAL or a second
// after a commit (checkpoint.go), and the writer's, which start the WAL
// over, once it holds backstopPages times pages. 0 turns checkpoints off,
// leaving them to a replication tool such as Litestream, which
// checkpoints under its own lock.
func WALAutocheckpoint(pages int) Option {
	return func(o *options) { o.autocheckpoint = &pages }
}

// Open opens (creating if needed) the database file at path. It does not
// migrate; call Migrate. A new file is created with mode 0600; SQLite gives
// its -wal and -shm files the database file's mode.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{open: func(dsn string) (*sql.DB, error) { return sql.Open("sqlite", dsn) }, checkpointEvery: checkpointEvery}
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
	pages := defaultAutocheckpoint
	if o.autocheckpoint != nil {
		pages = max(0, *o.autocheckpoint)
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", pages))
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
		if k == "_pragma" {
			v = slices.DeleteFunc(slices.Clone(v), func(p string) bool { return strings.HasPrefix(p, "wal_autocheckpoint(") })
		}
		wq[k] = v
	}
	wq.Add("_pragma", "temp_store(MEMORY)")
	// The writer's checkpoints are the backstop of the checkpointer's.
	wq.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", backstopPages*pages))
	// The writer's page cache holds what a batch changes: a batch of
	// 1 000 appends on as many conversations changes a couple of
	// thousand pages all over the frames' indexes, and with SQLite's
	// default 2 MiB the writer spilled changed pages into the WAL before
	// the commit and read others back from the file at every batch; a
	// larger cache cost 8 KiB frames more than it saved small ones
	// (docs/benchmarks.md). It grows to the limit only as pages are used.
	wq.Add("_pragma", fmt.Sprintf("cache_size(%d)", -writerCacheKiB))
	// The writer's WAL writes reach the OS a commit at a time, at the
	// sync of each (walgather.go).
	if err := registerGatherVFS(); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wq.Set("vfs", gatherVFSName)
	wdsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: wq.Encode()}).String()
	w, err := o.open(wdsn)
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
	if err := checkWriterSyncs(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := o.open(dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s := &Store{path: path, w: w, r: r}
	cfg := sqlstore.Config{Writer: w, Reader: r, Dialect: dialect{}, GroupCommit: true}
	if pages > 0 {
		c, err := o.open(dsn)
		if err != nil {
			w.Close()
			r.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		c.SetMaxOpenConns(1)
		c.SetMaxIdleConns(1)
		c.SetConnMaxLifetime(0)
		s.cp = newCheckpointer(c, abs, runPages*pages, o.checkpointEvery)
		cfg.AfterCommit = s.cp.commit
	}
	s.Store = sqlstore.New(cfg)
	return s, nil
}

// defaultAutocheckpoint is SQLite's default wal_autocheckpoint, in pages.
const defaultAutocheckpoint = 1000

// writerCacheKiB bounds the writer's page cache (PRAGMA cache_size).
const writerCacheKiB = 8 << 10

// Close closes the store: the checkpointer first, so that the writer,
// the last connection to close, checkpoints the WAL and removes it.
func (s *Store) Close() error {
	var err error
	if s.cp != nil {
		err = s.cp.close()
	}
	return errors.Join(err, s.Store.Close())
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
