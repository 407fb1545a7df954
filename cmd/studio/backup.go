package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/store/sqlite"
)

// pgBackupHelp is what backup and restore say on PostgreSQL, whose own
// tools do the job.
const pgBackupHelp = `this database is PostgreSQL: studio backup and restore copy the SQLite file only.
Back it up with pg_dump:     pg_dump --format=custom --file=studio.dump "$STUDIO_DATABASE_URL"
and restore with pg_restore: pg_restore --clean --if-exists --no-owner --dbname="$STUDIO_DATABASE_URL" studio.dump
(stop every daemon on the database before pg_restore)`

// newBackupCmd is `studio backup FILE`: a consistent copy of the SQLite
// database, taken while the daemon runs.
func newBackupCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the SQLite database to FILE (online: the daemon may keep running)",
		Long: `Copy the SQLite database in --data-dir to FILE as of one moment (VACUUM INTO from a read
transaction): the daemon keeps serving and writing meanwhile. FILE must not exist; it is written
beside itself and renamed into place when complete, so it is either absent or whole. The copy is a
single self-contained file (no -wal), readable by sqlite3 and restorable with studio restore.
For PostgreSQL (--database) use pg_dump: this command says how.`,
		Example: `  studio backup /var/backups/studio-$(date +%F).db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pg, err := usesPostgres(cfg); err != nil {
				return usageError{err}
			} else if pg {
				return errors.New(pgBackupHelp)
			}
			st, err := openDatabase(cmd.Context(), cfg, false)
			if err != nil {
				return err
			}
			defer st.Close()
			db := st.stateDB.(*sqlite.Store)
			if err := db.Backup(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s\n", databaseName(cfg), args[0])
			return nil
		},
	}
}

// newRestoreCmd is `studio restore FILE`: install a backup as the data
// directory's database, the daemon stopped.
func newRestoreCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the SQLite database with the backup FILE (the daemon must be stopped)",
		Long: `Install FILE (a studio backup, or any copy of studio.db) as the database in --data-dir.
Refused while a daemon holds the data directory (stop it first), when FILE fails PRAGMA
integrity_check, when it is not a studio database (another application's SQLite file, even one with
a schema_migrations table of its own), and when its schema is newer than this binary's migrations.
The database it replaces is kept beside it as studio.db.before-restore-<time> (-2, -3... for a
second restore within the same second), its WAL folded in; the new file is
renamed into place, so a crash leaves one database or the other, whole. An older schema is
migrated when the daemon next starts.
For PostgreSQL (--database) use pg_restore: this command says how.`,
		Example: `  systemctl stop studio && studio restore /var/backups/studio-2026-11-30.db && systemctl start studio`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pg, err := usesPostgres(cfg); err != nil {
				return usageError{err}
			} else if pg {
				return errors.New(pgBackupHelp)
			}
			lock, err := lockDataDir(cfg)
			if err != nil {
				return fmt.Errorf("restore refused: %w", err)
			}
			defer lock.Release()
			ms, err := databaseMigrations(cfg)
			if err != nil {
				return err
			}
			previous, fc, err := sqlite.Restore(cmd.Context(), args[0], dbPath(cfg.dataDir), len(ms), time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "restored %s (schema version %d, integrity ok) to %s\n", args[0], fc.SchemaVersion, dbPath(cfg.dataDir))
			if previous != "" {
				fmt.Fprintf(out, "the database it replaced is kept as %s\n", previous)
			}
			if fc.SchemaVersion < len(ms) {
				fmt.Fprintf(out, "its schema (version %d) is migrated to %d when the daemon starts\n", fc.SchemaVersion, len(ms))
			}
			return nil
		},
	}
}
