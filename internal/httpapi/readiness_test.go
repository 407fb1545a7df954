package httpapi_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// fakeLease is a LeaseHolder the test switches.
type fakeLease struct {
	mu  sync.Mutex
	err error
}

func (l *fakeLease) Held(time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *fakeLease) set(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// TestReadyz: /readyz is open and answers 200 while the database answers
// at the binary's schema and the lease holds; 503 with a reason when the
// lease is lost, migrations are pending, the server drains for shutdown or
// the database is closed. /healthz (liveness) stays 200 throughout.
func TestReadyz(t *testing.T) {
	t.Parallel()
	st, v := migratedStore(t, filepath.Join(t.TempDir(), "studio.db"))
	lease := &fakeLease{}
	migrations := v
	var mu sync.Mutex
	api := httpapi.New(httpapi.Config{Token: testToken, Logger: quietLogger(),
		Ready: func(ctx context.Context) (string, error) {
			mu.Lock()
			m := migrations
			mu.Unlock()
			return httpapi.StoreReadiness(st, m, lease)(ctx)
		}})
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer api.Close()
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	want := func(what string, code int, body string) {
		t.Helper()
		if c, b := get("/readyz", ""); c != code || b != body {
			t.Fatalf("%s: /readyz = %d %s, want %d %s", what, c, b, code, body)
		}
		if c, _ := get("/healthz", ""); c != 200 {
			t.Fatalf("%s: /healthz = %d, want 200 (liveness)", what, c)
		}
	}
	want("ready", 200, `{"status":"ready"}`)

	lease.set(errors.New("lease ran out at 2026-12-01T00:00:00Z: 3 renewals failed"))
	want("lease lost", 503, `{"status":"not_ready","reason":"lease not held"}`)
	if c, b := get("/readyz", testToken); c != 503 || !strings.Contains(b, `"detail":"lease ran out`) {
		t.Fatalf("with the token: %d %s, want the detail", c, b)
	}
	lease.set(nil)

	mu.Lock()
	migrations = v + 1 // a binary with one more migration than the database has
	mu.Unlock()
	want("behind", 503, `{"status":"not_ready","reason":"migrations pending: schema version `+itoa(int64(v))+` of `+itoa(int64(v+1))+`"}`)
	mu.Lock()
	migrations = v
	mu.Unlock()
	want("ready again", 200, `{"status":"ready"}`)

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	want("database closed", 503, `{"status":"not_ready","reason":"database unreachable"}`)
}

// TestReadyzDraining: from Drain (the daemon's shutdown began) /readyz
// answers 503 shutting down, whatever the checks say.
func TestReadyzDraining(t *testing.T) {
	t.Parallel()
	api := httpapi.New(httpapi.Config{Token: testToken, Logger: quietLogger(),
		Ready: func(context.Context) (string, error) { return "", nil }})
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer api.Close()
	status := func() (int, string) {
		resp, err := srv.Client().Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if c, b := status(); c != 200 {
		t.Fatalf("before Drain: %d %s", c, b)
	}
	api.Drain()
	if c, b := status(); c != 503 || b != `{"status":"not_ready","reason":"shutting down"}` {
		t.Fatalf("after Drain: %d %s", c, b)
	}
}

// TestReadyzWriterStalled: while a write waits for SQLite's group-commit
// writer longer than the limit (here another process holds the database
// file's write lock), /readyz answers 503 "StateDB writer stalled"; once
// the write goes through the daemon is ready again.
func TestReadyzWriterStalled(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "studio.db")
	st, v := migratedStore(t, path)
	api := httpapi.New(httpapi.Config{Token: testToken, Logger: quietLogger(),
		Ready: httpapi.WithWriterStall(httpapi.StoreReadiness(st, v, nil), st.WriterOldestWait, 300*time.Millisecond)})
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer api.Close()
	readyz := func() string {
		resp, err := srv.Client().Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	if b := readyz(); b != `{"status":"ready"}` {
		t.Fatalf("before the stall: %s", b)
	}

	// Another connection takes the write lock, as a stalled disk would
	// hold the writer.
	locker, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	conn, err := locker.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := st.CreateConversation(context.Background(), store.CreateConversationParams{ID: "stalled", Now: storetest.Epoch})
		wrote <- err
	}()
	testutil.Eventually(t, func() bool { return readyz() == `{"status":"not_ready","reason":"StateDB writer stalled"}` },
		"/readyz says the writer is stalled")
	if _, err := conn.ExecContext(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if b := readyz(); b != `{"status":"ready"}` {
		t.Fatalf("after the stall: %s", b)
	}
}

// migratedStore opens a new migrated database at path, closed when t
// ends, and returns it with its schema version.
func migratedStore(t *testing.T, path string) (*sqlite.Store, int) {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := st.Migrate(t.Context(), storetest.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	return st, v
}
