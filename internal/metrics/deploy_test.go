package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/metrics"
)

// The dashboard and the alert rules shipped in deploy/, relative to this
// package.
var (
	dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "studio-dashboard.json")
	rulesFile     = filepath.Join("..", "..", "deploy", "prometheus", "studio-alerts.yml")
	testsFile     = filepath.Join("..", "..", "deploy", "prometheus", "studio-alerts.test.yml")
)

// metricName finds the daemon's metric names in a PromQL expression: the
// studio_ families, and the Go runtime's and the process's.
var metricName = regexp.MustCompile(`\b(?:studio|go|process)_[a-z0-9_]+\b`)

// prometheusSeries are the series Prometheus itself makes for a target.
var prometheusSeries = regexp.MustCompile(`^\s*up\{`)

// daemonFamilies is every family the daemon registers, as serve registers
// them (the scrape-time ones included).
func daemonFamilies() map[string]bool {
	r := metrics.New(metrics.Build{Version: "test"})
	r.ObserveLeases(func() metrics.LeaseStats { return metrics.LeaseStats{} })
	r.ObserveWriter(func() time.Duration { return 0 })
	r.ObservePendingProposals(func() (int, error) { return 0, nil })
	r.ObserveWebhookQueue(func() (time.Duration, error) { return 0, nil })
	r.ObserveReadiness(func() bool { return true })
	return r.Families()
}

// known reports whether name is a family, or a histogram's series of one.
func known(families map[string]bool, name string) bool {
	if families[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] {
			return true
		}
	}
	return false
}

// TestDeployReferencesExist: every metric the Grafana dashboard and the
// alert rules name is one the daemon exposes, so neither rots when a
// family is renamed or removed; every query names at least one.
func TestDeployReferencesExist(t *testing.T) {
	t.Parallel()
	families := daemonFamilies()
	check := func(where, expr string) {
		t.Helper()
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 && !prometheusSeries.MatchString(expr) {
			t.Errorf("%s: %q names no metric of the daemon", where, expr)
		}
		for _, n := range names {
			if !known(families, n) {
				t.Errorf("%s: %s is not a metric of the daemon (in %q)", where, n, expr)
			}
		}
	}

	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			check("dashboard panel "+p.Title, tg.Expr)
		}
	}
	if exprs < 20 {
		t.Errorf("the dashboard has %d queries", exprs)
	}

	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	exprLine := regexp.MustCompile(`(?m)^\s*expr:\s*(.+)$`)
	found := exprLine.FindAllStringSubmatch(string(rules), -1)
	if len(found) < 5 {
		t.Fatalf("%s: %d rules", rulesFile, len(found))
	}
	for _, m := range found {
		check("alert rule", m[1])
	}
	// The annotations name metrics too: they must exist as well.
	for _, n := range metricName.FindAllString(string(rules), -1) {
		if !known(families, n) {
			t.Errorf("%s names %s, which is not a metric of the daemon", rulesFile, n)
		}
	}
}

// runbookFile is where each alert's runbook entry is.
const runbookFile = "../../docs/operating.md"

// TestEveryAlertTestedAndInRunbook: each alert rule has a promtool unit
// test that expects it to fire, and a runbook entry (a heading naming
// it) in docs/operating.md; the signals on-call acts on each have an alert
// and a dashboard panel.
func TestEveryAlertTestedAndInRunbook(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	rules, tests, runbook, dash := read(rulesFile), read(testsFile), read(runbookFile), read(dashboardFile)
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)$`).FindAllStringSubmatch(rules, -1)
	if len(alerts) < 13 {
		t.Fatalf("%s: %d alerts", rulesFile, len(alerts))
	}
	for _, a := range alerts {
		name := a[1]
		firing := regexp.MustCompile(`(?m)^\s+alertname: ` + name + `\n\s+exp_alerts:\n\s+- exp_labels:`)
		if !firing.MatchString(tests) {
			t.Errorf("%s has no promtool test in %s that expects it to fire", name, testsFile)
		}
		if !regexp.MustCompile(`(?m)^#+ .*\b` + name + `\b`).MatchString(runbook) {
			t.Errorf("%s has no runbook entry (a heading naming it) in %s", name, runbookFile)
		}
	}
	for _, signal := range []string{"studio_ready", "studio_webhook_queue_age_seconds", `status="5xx"`, `code="service_failure"`,
		"studio_lease_reaped_instances_total", "studio_store_writer_oldest_wait_seconds"} {
		if !strings.Contains(rules, signal) {
			t.Errorf("no alert watches %s", signal)
		}
		if !strings.Contains(dash, strings.ReplaceAll(signal, `"`, `\"`)) {
			t.Errorf("no dashboard panel shows %s", signal)
		}
	}
}
