package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlstore"
)

// Backup and restore of the database file. A backup is VACUUM INTO from a
// read transaction: a consistent copy as of one commit, taken beside a
// running daemon (WAL lets the writer go on meanwhile), compacted and with
// no -wal of its own. A restore checks a copy and installs it in place of
// the data directory's database; the caller holds the data directory's
// lock, so no daemon has the file open.

// Backup writes a consistent copy of the database to dest, which must not
// exist. The copy is written beside dest and renamed into place once it is
// complete and synced, so dest is either absent or whole.
func (s *Store) Backup(ctx context.Context, dest string) error {
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("backup: %s exists: choose a new file name", dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	dir := filepath.Dir(dest)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dest)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	// VACUUM INTO refuses a non-empty file, and an empty one is what
	// CreateTemp made: it keeps the name unique and the mode 0600.
	defer os.Remove(tmpPath)
	if _, err := s.r.ExecContext(ctx, `VACUUM INTO ?`, tmpPath); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(tmpPath); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// Link, not rename: a file created at dest meanwhile is not replaced.
	if err := os.Link(tmpPath, dest); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return syncDir(dir)
}

// FileCheck is what Inspect found in a database file.
type FileCheck struct {
	SchemaVersion int
	Problems      []string // PRAGMA integrity_check's findings; none: sound
}

// Inspect opens the database file at path (not the data directory's:
// Restore passes its private copy), runs PRAGMA integrity_check and reads
// its schema version. A file that is not a SQLite database, or not one of
// studio's, is an error.
func Inspect(ctx context.Context, path string) (FileCheck, error) {
	var fc FileCheck
	abs, err := filepath.Abs(path)
	if err != nil {
		return fc, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return fc, err
	} else if fi.Size() == 0 {
		return fc, fmt.Errorf("%s is empty, not a database", path)
	}
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: "_pragma=busy_timeout(10000)"}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fc, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check(100)`)
	if err != nil {
		return fc, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return fc, fmt.Errorf("integrity check: %w", err)
		}
		if !strings.EqualFold(line, "ok") {
			fc.Problems = append(fc.Problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return fc, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	rows.Close()
	if len(fc.Problems) > 0 {
		return fc, nil
	}
	if err := checkIdentity(ctx, db, path); err != nil {
		return fc, err
	}
	if fc.SchemaVersion, err = sqlstore.CurrentVersion(ctx, db); err != nil {
		return fc, err
	}
	return fc, nil
}

// checkIdentity refuses a SQLite database that is not studio's: a
// schema_migrations table is common (golang-migrate, dbmate and others
// keep one), so it must have studio's layout (version, name, applied_at),
// each migration it records must be this binary's of that number and
// name (newer ones are a newer release's, which Restore refuses on its
// own), and the first migration's tables must be there.
func checkIdentity(ctx context.Context, db *sql.DB, path string) error {
	notStudio := func(why string, args ...any) error {
		return fmt.Errorf("%s is a SQLite database but not a studio one: %s", path, fmt.Sprintf(why, args...))
	}
	cols := map[string]string{}
	rows, err := db.QueryContext(ctx, `SELECT name, type FROM pragma_table_info('schema_migrations')`)
	if err != nil {
		return fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
		}
		cols[name] = strings.ToUpper(typ)
	}
	rows.Close()
	if len(cols) == 0 {
		return notStudio("no schema_migrations table")
	}
	want := map[string]string{"version": "INTEGER", "name": "TEXT", "applied_at": "REAL"}
	if len(cols) != len(want) || cols["version"] != want["version"] || cols["name"] != want["name"] || cols["applied_at"] != want["applied_at"] {
		return notStudio("its schema_migrations table has another tool's layout (%s)", describeColumns(cols))
	}
	ms, err := Migrations()
	if err != nil {
		return err
	}
	recorded, err := recordedMigrations(ctx, db)
	if err != nil {
		return fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	n := 0
	for _, r := range recorded {
		if r.Version > len(ms) {
			break // a newer release's: Restore says so
		}
		if r.Version < 1 || ms[r.Version-1].Name != r.Name {
			return notStudio("schema_migrations records migration %d as %q, not one of studio's", r.Version, r.Name)
		}
		n++
	}
	if n == 0 {
		return notStudio("schema_migrations records none of studio's migrations")
	}
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('studio_operator_conversations', 'studio_operator_turns', 'studio_operator_frames')`).Scan(&tables); err != nil {
		return fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	if tables != 3 {
		return notStudio("the operator's tables are missing")
	}
	return nil
}

// recordedMigrations are the rows of schema_migrations, by version.
func recordedMigrations(ctx context.Context, db *sql.DB) ([]store.Migration, error) {
	rows, err := db.QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Migration
	for rows.Next() {
		var m store.Migration
		if err := rows.Scan(&m.Version, &m.Name); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// describeColumns lists a table's columns as "name TYPE, ...", in name order.
func describeColumns(cols map[string]string) string {
	names := make([]string, 0, len(cols))
	for n := range cols {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		names[i] = strings.TrimSpace(n + " " + cols[n])
	}
	return strings.Join(names, ", ")
}

// RestoreError is a copy Restore refused, with why.
type RestoreError struct{ Reason string }

func (e *RestoreError) Error() string { return "restore refused: " + e.Reason }

// Restore installs the database file src as the database at dbPath. The
// caller holds the data directory's lock: no process has dbPath open.
// src is copied into the data directory first and checked there (PRAGMA
// integrity_check, studio's schema (checkIdentity) no newer than
// maxVersion); a copy that
// fails either is a *RestoreError and nothing changes. The database it
// replaces, with its WAL checkpointed into it, is kept as dbPath +
// ".before-restore-" + a UTC timestamp, -2, -3... within one second
// (returned as previous, "" when there was none). The new file is renamed into place: a crash leaves either
// database whole.
func Restore(ctx context.Context, src, dbPath string, maxVersion int, now time.Time) (previous string, fc FileCheck, err error) {
	dir := filepath.Dir(dbPath)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dbPath)+".restore-*")
	if err != nil {
		return "", fc, fmt.Errorf("restore: %w", err)
	}
	tmpPath := tmp.Name()
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmpPath + suffix)
		}
	}()
	in, err := os.Open(src)
	if err != nil {
		tmp.Close()
		return "", fc, fmt.Errorf("restore: %w", err)
	}
	_, err = io.Copy(tmp, in)
	in.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fc, fmt.Errorf("restore: copy %s: %w", src, err)
	}
	fc, err = Inspect(ctx, tmpPath)
	if err != nil {
		return "", fc, &RestoreError{Reason: strings.ReplaceAll(err.Error(), tmpPath, src)}
	}
	if len(fc.Problems) > 0 {
		return "", fc, &RestoreError{Reason: fmt.Sprintf("%s fails PRAGMA integrity_check: %s", src, strings.Join(fc.Problems, "; "))}
	}
	if fc.SchemaVersion > maxVersion {
		return "", fc, &RestoreError{Reason: fmt.Sprintf("%s has schema version %d, newer than this binary's %d: restore it with the studio release that wrote it, or a newer one",
			src, fc.SchemaVersion, maxVersion)}
	}
	// Inspect closed its connection: whatever WAL the copy had is folded in.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(tmpPath + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fc, fmt.Errorf("restore: %w", err)
		}
	}
	if err := syncFile(tmpPath); err != nil {
		return "", fc, fmt.Errorf("restore: %w", err)
	}

	if _, err := os.Stat(dbPath); err == nil {
		// Fold the current WAL into the file, so that keeping the file
		// alone keeps everything and the old -wal can go: a -wal left
		// beside the new file would be replayed into it.
		if err := checkpointClose(ctx, dbPath); err != nil {
			return "", fc, fmt.Errorf("restore: checkpoint the current database: %w", err)
		}
		if previous, err = keepPrevious(dbPath, now); err != nil {
			return "", fc, fmt.Errorf("restore: keep the current database: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fc, fmt.Errorf("restore: %w", err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(dbPath + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return previous, fc, fmt.Errorf("restore: %w", err)
		}
	}
	if err := os.Chmod(tmpPath, 0o600); err != nil {
		return previous, fc, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmpPath, dbPath); err != nil {
		return previous, fc, fmt.Errorf("restore: %w", err)
	}
	return previous, fc, syncDir(dir)
}

// keepPrevious links the database at dbPath to a name of its own,
// dbPath.before-restore-<UTC time>, with -2, -3... when a restore within
// the same second took that name already; an existing name is never
// replaced.
func keepPrevious(dbPath string, now time.Time) (string, error) {
	base := dbPath + ".before-restore-" + now.UTC().Format("20060102T150405Z")
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = base + "-" + strconv.Itoa(i)
		}
		err := os.Link(dbPath, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) || i >= 1000 {
			return "", err
		}
	}
}

// checkpointClose opens the database at path, copies its WAL into it and
// closes it; SQLite removes the WAL when its last connection closes.
func checkpointClose(ctx context.Context, path string) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	busy, err := s.Checkpoint(ctx)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err == nil && busy {
		err = errors.New("the database is in use (WAL checkpoint busy)")
	}
	return err
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
