package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/store/storetest"
)

// The package's tests run against a PostgreSQL server of their own
// (pgtest): TestMain starts it and migrates a template database; each test
// gets a fresh database copied from the template, so tests run in
// parallel. Without the server binaries the tests skip, unless
// STUDIO_REQUIRE_POSTGRES=1 (CI).

// testServer is the package's running server; nil when tests skip.
var testServer *pgtest.Server

// skipReason says why testServer is nil.
var skipReason string

const templateDB = "studio_template"

func TestMain(m *testing.M) {
	code := pgtest.Main(m, migrateTemplate, func(srv *pgtest.Server, skip string) { testServer, skipReason = srv, skip })
	if code == 0 && testServer != nil {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// migrateTemplate creates the migrated template every test database copies.
func migrateTemplate(srv *pgtest.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.ExecContext(ctx, `CREATE DATABASE `+templateDB); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	st, err := Open(ctx, srv.URL(templateDB))
	if err != nil {
		return err
	}
	_, err = st.Migrate(ctx, storetest.Epoch)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	return nil
}

// newDatabase creates a migrated database for tb, dropped when tb ends,
// and returns its URL.
func newDatabase(tb testing.TB) string {
	tb.Helper()
	if testServer == nil {
		tb.Skip(skipReason)
	}
	return testServer.NewDatabase(tb, templateDB)
}

func freePort() (int, error) { return pgtest.FreePort() }
