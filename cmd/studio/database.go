package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/studio/operator/internal/datadir"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/studio"
)

// StateDB selection: --database (env STUDIO_DATABASE_URL) empty means the
// SQLite file in the data directory; a postgres:// URL means PostgreSQL,
// which several daemons may share.

func dbPath(dataDir string) string { return filepath.Join(dataDir, "studio.db") }

// stateDB is a backend as the commands use it: the store and its migrations.
type stateDB interface {
	store.Store
	Migrate(ctx context.Context, now time.Time) (int, error)
	// MigrationsAppliedAt: what the Migrate call given that now applied.
	MigrationsAppliedAt(ctx context.Context, at time.Time) ([]store.Migration, error)
	// Exclusive runs fn alone among the daemons on the database (seeding).
	Exclusive(ctx context.Context, fn func(context.Context) error) error
}

// database is an opened backend and its file upkeep, nil where the engine
// has none (PostgreSQL).
type database struct {
	stateDB
	maint studio.Maintenance
}

// usesPostgres reports whether --database selects PostgreSQL; any other
// non-empty value is refused.
func usesPostgres(cfg *config) (bool, error) {
	switch {
	case cfg.database == "":
		return false, nil
	case strings.HasPrefix(cfg.database, "postgres://"), strings.HasPrefix(cfg.database, "postgresql://"):
		return true, nil
	}
	return false, errors.New("--database (STUDIO_DATABASE_URL) must be a postgres:// URL, or empty for the SQLite file in --data-dir")
}

// lockDataDir creates the data directory and, for SQLite, takes its lock:
// one daemon (or migrate) per database file. A second one is refused with a
// message naming the holder. PostgreSQL, which several daemons may share,
// takes no lock (nil: a nil lock's methods do nothing).
func lockDataDir(cfg *config) (*datadir.Lock, error) {
	if err := datadir.Create(cfg.dataDir); err != nil {
		return nil, err
	}
	if pg, err := usesPostgres(cfg); err != nil || pg {
		return nil, err
	}
	return datadir.Acquire(cfg.dataDir)
}

// openDatabase opens StateDB without migrating. For SQLite the data
// directory's file must exist unless create is set.
func openDatabase(ctx context.Context, cfg *config, create bool) (database, error) {
	pg, err := usesPostgres(cfg)
	if err != nil {
		return database{}, err
	}
	if pg {
		st, err := postgres.OpenWith(ctx, cfg.database, cfg.pg)
		if err != nil {
			return database{}, fmt.Errorf("%s: %w", databaseName(cfg), err)
		}
		return database{stateDB: st}, nil
	}
	path := dbPath(cfg.dataDir)
	if create {
		if err := datadir.Create(cfg.dataDir); err != nil {
			return database{}, err
		}
	} else if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return database{}, fmt.Errorf("no database at %s: start the daemon once (studio serve) or pass --data-dir", path)
	}
	var opts []sqlite.Option
	if n := cfg.walAutocheckpoint; n != nil && *n >= 0 {
		opts = append(opts, sqlite.WALAutocheckpoint(*n))
	}
	st, err := sqlite.Open(path, opts...)
	if err != nil {
		return database{}, err
	}
	return database{stateDB: st, maint: st}, nil
}

// migrated is what openStore's migration did.
type migrated struct {
	version int               // the schema version after it
	applied []store.Migration // what it applied, in order; none: the schema was current
}

// names are the applied migrations' file names without .sql, comma-separated.
func (m migrated) names() string {
	names := make([]string, len(m.applied))
	for i, a := range m.applied {
		names[i] = fmt.Sprintf("%04d_%s", a.Version, a.Name)
	}
	return strings.Join(names, ", ")
}

// log says what the migration did, on the daemon's log.
func (m migrated) log(log *slog.Logger, db string) {
	if len(m.applied) == 0 {
		log.Info("StateDB schema is current: no migration to apply", "db", db, "schema_version", m.version)
		return
	}
	log.Info("StateDB migrated", "db", db, "from_version", m.applied[0].Version-1, "schema_version", m.version,
		"applied", len(m.applied), "migrations", m.names())
}

// openStore opens and migrates StateDB.
func openStore(ctx context.Context, cfg *config) (database, migrated, error) {
	st, err := openDatabase(ctx, cfg, true)
	if err != nil {
		return database{}, migrated{}, err
	}
	now := time.Now()
	v, err := st.Migrate(ctx, now)
	if err != nil {
		st.Close()
		return database{}, migrated{version: v}, fmt.Errorf("migrate: %w", err)
	}
	applied, err := st.MigrationsAppliedAt(ctx, now)
	if err != nil {
		st.Close()
		return database{}, migrated{version: v}, err
	}
	return st, migrated{version: v, applied: applied}, nil
}

// databaseMigrations are the selected backend's migrations.
func databaseMigrations(cfg *config) ([]store.Migration, error) {
	if pg, _ := usesPostgres(cfg); pg {
		return postgres.Migrations()
	}
	return sqlite.Migrations()
}

// databaseName names StateDB for people and logs: the SQLite file, or the
// PostgreSQL URL without its password.
func databaseName(cfg *config) string {
	if cfg.database == "" {
		return dbPath(cfg.dataDir)
	}
	u, err := url.Parse(cfg.database)
	if err != nil {
		return "the PostgreSQL database (unparsable URL)"
	}
	return u.Redacted()
}

func newMigrateCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply StateDB migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lock, err := lockDataDir(cfg)
			if err != nil {
				return err
			}
			defer lock.Release()
			st, m, err := openStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			if len(m.applied) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "StateDB %s is at schema version %d: nothing to apply\n", databaseName(cfg), m.version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "StateDB %s migrated from schema version %d to %d: applied %s\n",
				databaseName(cfg), m.applied[0].Version-1, m.version, m.names())
			return nil
		},
	}
}
