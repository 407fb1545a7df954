package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/testutil"
)

// TestProcessLogsSayWhyAProviderFailed: a model provider that cannot be
// reached fails a turn, and the log says why on every line of it: each
// model attempt and each retry carries the provider's error text and the
// conversation, request and model; the turn's end carries it too. The
// start-up warning for an entry with a base URL of its own names that URL.
func TestProcessLogsSayWhyAProviderFailed(t *testing.T) {
	t.Parallel()
	port, err := pgtest.FreePort() // a loopback port nothing listens on
	if err != nil {
		t.Fatal(err)
	}
	d := startJSONLogDaemon(t, "--model", "down",
		"--provider", fmt.Sprintf("down=openai,model=m,base-url=http://127.0.0.1:%d/v1", port),
		"--provider", "cloud=openai,base-url=https://api.openai.com/v1/,api-key-env=STUDIO_TEST_NO_SUCH_KEY",
		"--model-turn-budget", "30s")
	conv := d.newConv(t, "")
	acc := d.turn(t, conv, "hello")
	if out := d.untilDone(t, conv); out != protocol.OutcomeFailed {
		t.Fatalf("the turn on an unreachable provider ended %s", out)
	}
	testutil.Eventually(t, func() bool { return len(d.logLines().find("turn ended", "request", acc.RequestID)) > 0 }, "the turn's end is logged")
	lines := d.logLines()
	refused := func(l logLine) bool { return strings.Contains(l.str("err"), "connection refused") }
	attempts := lines.find("model attempt", "request", acc.RequestID)
	if len(attempts) < 2 {
		t.Fatalf("%d model attempts logged, want the retries too", len(attempts))
	}
	for _, l := range attempts {
		if !refused(l) || l.str("conversation") != conv || l.str("model") != "down" || l.str("error_code") != string(protocol.ModelFailure) {
			t.Errorf("a model attempt line does not say why it failed, or for which turn: %s", l.raw)
		}
	}
	retries := lines.find("model call failed; retrying", "request", acc.RequestID)
	if len(retries) == 0 {
		t.Fatal("no retry line")
	}
	for _, l := range retries {
		if !refused(l) || l.str("conversation") != conv || l.str("model") != "down" {
			t.Errorf("a retry line lacks its cause, conversation or model: %s", l.raw)
		}
	}
	if ended := lines.find("turn ended", "request", acc.RequestID); !refused(ended[0]) {
		t.Errorf("the turn's end does not say why it failed: %s", ended[0].raw)
	}
	warned := lines.find("a configured model provider cannot work: its turns (and, for the default, playbook runs) will fail until it is fixed", "model", "cloud")
	if len(warned) != 1 || warned[0].str("base_url") != "https://api.openai.com/v1" ||
		!strings.Contains(warned[0].str("problem"), "https://api.openai.com/v1") {
		t.Errorf("the start-up warning for the entry with its own base URL: %v", warned)
	}
	if w := lines.find("a configured model provider cannot work: its turns (and, for the default, playbook runs) will fail until it is fixed", "model", "down"); len(w) != 0 {
		t.Errorf("the entry on a local server was warned about: %s", w[0].raw)
	}
}

// TestProcessPostgresOutageLogsSummarised: PostgreSQL stopped for a few
// seconds under an idle daemon: each failure the outage causes is logged
// once and then summarised with its count, not once per retry (a claim
// loop retries four times a second); the daemon is ready again after, and
// the summaries still open are written when it stops.
func TestProcessPostgresOutageLogsSummarised(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	srv.Exec(t, `CREATE DATABASE studio`)
	d := startJSONLogDaemon(t, "--database", srv.URL("studio"))
	ctx := d.ctx
	before := len(d.logLines())
	srv.Shutdown()
	select { // the outage's length is the fault, not a wait for something
	case <-time.After(8 * time.Second):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, func() bool { return readyz(ctx, d.base) == http.StatusOK }, "the daemon ready after the outage")
	d.stop(t) // the summaries of the runs still open are written at exit
	summary := regexp.MustCompile(`\(\d+ times in [0-9.]+m?s\)$`)
	perMsg := map[string]int{}
	var failures []string
	summaries := 0
	for _, l := range d.logLines()[before:] {
		if l.level() != "WARN" && l.level() != "ERROR" {
			continue
		}
		failures = append(failures, l.raw)
		perMsg[summary.ReplaceAllString(l.msg(), "")]++
		if summary.MatchString(l.msg()) {
			summaries++
		}
	}
	t.Logf("the outage wrote %d warning and error lines", len(failures))
	for msg, n := range perMsg {
		// The first line and a summary for each error text the failure
		// went through (refused, shutting down, starting up).
		if n > 6 {
			t.Errorf("%q was logged %d times in the outage", msg, n)
		}
	}
	if summaries == 0 {
		t.Error("no summary of the repeated failures")
	}
	if t.Failed() {
		t.Logf("warnings and errors:\n%s", strings.Join(failures, "\n"))
	}
}

// TestProcessDoctorNamesUnreachableModel: doctor asks the daemon, which
// checks every configured model: one conversations may choose that does
// not answer makes the report degraded, named with why.
func TestProcessDoctorNamesUnreachableModel(t *testing.T) {
	t.Parallel()
	port, err := pgtest.FreePort() // a loopback port nothing listens on
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--provider", fmt.Sprintf("gateway=openai,model=m,base-url=http://127.0.0.1:%d/v1", port))
	out, _, code := runStudio(t, []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}, "doctor")
	if code != exitOK || !strings.Contains(out, "status:     degraded") || !strings.Contains(out, "the model gateway is not answering") {
		t.Fatalf("doctor with an unreachable model: exit %d:\n%s", code, out)
	}
}
