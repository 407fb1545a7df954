package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Upkeep of the database file, for the application's maintenance commands
// and doctor. These are SQLite's own and stay out of store.Store: the
// application reaches them through an interface of its own.

// Vacuum rebuilds the database file, returning free pages to the file
// system. It takes the writer, so writes wait while it runs.
func (s *Store) Vacuum(ctx context.Context) error {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	defer c.Close()
	// VACUUM builds the new file in a temporary database: on disk, not in
	// the memory the writer's journals use (Open).
	if _, err := c.ExecContext(ctx, `PRAGMA temp_store = FILE`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	defer c.ExecContext(context.WithoutCancel(ctx), `PRAGMA temp_store = MEMORY`)
	if _, err := c.ExecContext(ctx, `VACUUM`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// Checkpoint copies the WAL into the database file and truncates the WAL.
// busy reports that readers kept part of the WAL from being checkpointed.
func (s *Store) Checkpoint(ctx context.Context) (busy bool, err error) {
	var b, logFrames, checkpointed int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&b, &logFrames, &checkpointed); err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	return b != 0, nil
}

// IntegrityCheck runs PRAGMA quick_check (quick) or integrity_check and
// returns the problems it reports; none means the database is sound.
func (s *Store) IntegrityCheck(ctx context.Context, quick bool) ([]string, error) {
	pragma := `PRAGMA integrity_check(100)`
	if quick {
		pragma = `PRAGMA quick_check(100)`
	}
	rows, err := s.r.QueryContext(ctx, pragma)
	if err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, fmt.Errorf("integrity check: %w", err)
		}
		if !strings.EqualFold(line, "ok") {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	return problems, nil
}

// DatabaseFiles names the database file (its base name only: no host path)
// and sizes it and its WAL in bytes.
func (s *Store) DatabaseFiles() (name string, dbBytes, walBytes int64, err error) {
	name = filepath.Base(s.path)
	fi, err := os.Stat(s.path)
	if err != nil {
		return name, 0, 0, fmt.Errorf("stat database: %w", err)
	}
	dbBytes = fi.Size()
	if wi, err := os.Stat(s.path + "-wal"); err == nil {
		walBytes = wi.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return name, dbBytes, 0, fmt.Errorf("stat wal: %w", err)
	}
	return name, dbBytes, walBytes, nil
}

// FreeSpace is the space available to this process on the file system of
// the data directory, in bytes.
func (s *Store) FreeSpace() (int64, error) {
	return freeSpace(filepath.Dir(s.path))
}
