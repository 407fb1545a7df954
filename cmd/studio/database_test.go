package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/studio/operator/internal/store/sqlite"
)

// TestMigrateSaysWhatItApplied: `studio migrate` and serve's log name the
// migrations they applied, and say plainly when there was nothing to
// apply; the two outputs differ.
func TestMigrateSaysWhatItApplied(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ms, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	migrate := func() string {
		t.Helper()
		root, _ := newRootConfig()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"migrate", "--data-dir", dir})
		if err := root.ExecuteContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	first, second := migrate(), migrate()
	last := ms[len(ms)-1]
	if !strings.Contains(first, "migrated from schema version 0 to "+strconv.Itoa(len(ms))) || !strings.Contains(first, "0001_operator_tables") ||
		!strings.Contains(first, fmt.Sprintf("%04d", last.Version)+"_"+last.Name) {
		t.Errorf("first migrate said %q, want every migration named", first)
	}
	if !strings.Contains(second, "at schema version "+strconv.Itoa(len(ms))+": nothing to apply") || first == second {
		t.Errorf("second migrate said %q (first %q), want nothing applied", second, first)
	}

	// The daemon's log says the same.
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st, m, err := openStore(context.Background(), &config{dataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	m.log(log, "studio.db")
	if !strings.Contains(logs.String(), `msg="StateDB migrated"`) || !strings.Contains(logs.String(), "applied="+strconv.Itoa(len(ms))) {
		t.Errorf("serve logged %q for a new database", logs.String())
	}
	logs.Reset()
	st, m, err = openStore(context.Background(), &config{dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	m.log(log, "studio.db")
	if !strings.Contains(logs.String(), "no migration to apply") {
		t.Errorf("serve logged %q for a current database", logs.String())
	}
}
