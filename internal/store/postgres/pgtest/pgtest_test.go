package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/store/postgres/pgtest"
)

// TestRestartKeepsDataAndPort: a private server shut down refuses
// connections, and started again (or restarted) serves the same data on
// the same URL; commit timestamps are kept.
func TestRestartKeepsDataAndPort(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	srv.Exec(t, `CREATE DATABASE faults`)
	url := srv.URL("faults")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE TABLE kept (v INT); INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	if srv.Running() {
		t.Fatal("running after Shutdown")
	}
	if err := exec(`SELECT 1`); err == nil {
		t.Fatal("a shut down server accepted a connection")
	}
	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	if err := exec(`INSERT INTO kept VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	var committed bool
	if err := conn.QueryRow(ctx, `SELECT COUNT(*), bool_and(pg_xact_commit_timestamp(xmin) IS NOT NULL) FROM kept`).Scan(&n, &committed); err != nil {
		t.Fatal(err)
	}
	if n != 2 || !committed {
		t.Fatalf("after the restarts: %d rows, commit timestamps %v", n, committed)
	}
	srv.Exec(t, `SELECT 1`) // the administrative connection follows the restarts
}
