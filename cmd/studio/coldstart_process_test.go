package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/testutil"
)

// coldStartOutage is how long PostgreSQL stays down after the daemon
// started: longer than the start's backoff reaches (2 s), so the daemon
// has been waiting at its slowest pace when the database comes back.
const coldStartOutage = 4 * time.Second

// TestProcessPostgresColdStart: a daemon started while its PostgreSQL
// server is down waits for it, saying so in the log with its budget;
// once the server is up the daemon becomes ready and a turn completes.
func TestProcessPostgresColdStart(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	srv.Exec(t, `CREATE DATABASE studio`)
	url := srv.URL("studio")
	srv.Shutdown()

	d := spawnDaemon(t, t.TempDir(), "--database", url, "--db-outage-budget", "2m")
	testutil.Eventually(t, func() bool { return strings.Contains(d.Logs(), "StateDB unreachable at start: waiting for it") },
		"the daemon says it waits for the database")
	if !strings.Contains(d.Logs(), "budget=120") {
		t.Errorf("the waiting line does not give the budget:\n%s", d.Logs())
	}
	select { // the outage's length is the fault, not a wait for something
	case <-time.After(coldStartOutage):
	case <-d.exited:
		t.Fatalf("the daemon exited while waiting for the database:\n%s", d.Logs())
	}
	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	d.ready(t)
	ctx := testCtx(t)
	testutil.Eventually(t, func() bool { return readyz(ctx, d.URL) == http.StatusOK }, "/readyz answers 200 after the database came back")
	t.Logf("ready %v after PostgreSQL accepted connections again", time.Since(back).Round(10*time.Millisecond))
	if !strings.Contains(d.Logs(), "StateDB reachable: starting") {
		t.Errorf("the log does not say the database came back:\n%s", d.Logs())
	}

	turnCompletes(t, ctx, d, "the cold start")
}

// TestProcessPostgresDownPastBudgetExits: a database that stays
// unreachable for the whole --db-outage-budget makes the daemon exit
// non-zero, naming the budget, for its supervisor to start it again.
func TestProcessPostgresDownPastBudgetExits(t *testing.T) {
	t.Parallel()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	d := spawnDaemon(t, t.TempDir(), "--database", fmt.Sprintf("postgres://studio@127.0.0.1:%d/studio?sslmode=disable", port),
		"--db-outage-budget", "3s")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	select {
	case <-d.exited:
	case <-ctx.Done():
		t.Fatalf("the daemon still runs past its outage budget:\n%s", d.Logs())
	}
	if code := d.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("the daemon exited 0:\n%s", d.Logs())
	}
	logs := d.Logs()
	for _, want := range []string{"StateDB stayed unreachable at start: exiting for the supervisor", "connection refused", "--db-outage-budget"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

// readyz is the status GET /readyz answers, 0 when nothing answers.
func readyz(ctx context.Context, base string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestProcessPostgresDownBetweenOpenAndRegister: the database goes down
// after the daemon opened its store and before it registered its
// instance (where a daemon that lost its lease and starts afresh may find
// a database restarting). The daemon tries the registration again until
// the database is back, then serves; it does not exit.
func TestProcessPostgresDownBetweenOpenAndRegister(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	srv.Exec(t, `CREATE DATABASE studio`)
	d := spawnDaemonEnv(t, []string{pauseVariable + "=" + pauseRegister}, t.TempDir(), "--database", srv.URL("studio"), "--db-outage-budget", "2m")
	testutil.Eventually(t, func() bool { return strings.Contains(d.Logs(), "paused at a test's pause point") },
		"the daemon at its pause point before registering")
	srv.Shutdown()
	d.resume()
	testutil.Eventually(t, func() bool {
		return strings.Contains(d.Logs(), "StateDB unreachable while starting: trying again") || !d.running()
	}, "the daemon tries the registration again, or exits")
	if !d.running() {
		t.Fatalf("the daemon exited when the database was down at its registration:\n%s", d.Logs())
	}
	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	d.ready(t)
	ctx := testCtx(t)
	testutil.Eventually(t, func() bool { return readyz(ctx, d.URL) == http.StatusOK }, "/readyz answers 200 after the database came back")
	turnCompletes(t, ctx, d, "the outage")
}

// turnCompletes runs a turn in a new conversation on d and fails unless
// it completes.
func turnCompletes(t *testing.T, ctx context.Context, d *daemon, after string) {
	t.Helper()
	conv := newConversation(t, ctx, d)
	follower := follow(t, d, conv.ID, 0)
	acc := submit(t, ctx, d, conv.ID, "hello")
	done := follower.waitFor(t, ctx, "the turn's done frame", doneOf(acc.RequestID))
	if outcome(done) != protocol.OutcomeCompleted {
		t.Fatalf("the turn after %s ended %s:\n%s", after, outcome(done), follower.describe())
	}
}
