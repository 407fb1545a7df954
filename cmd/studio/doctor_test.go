package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/studio/operator/internal/app"
)

// TestDoctorWithoutDaemon: with no daemon at --server, doctor reads the
// database file directly and says so.
func TestDoctorWithoutDaemon(t *testing.T) { // not parallel: t.Setenv
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil { // as studio creates it: doctor reports a data dir others can read
		t.Fatal(err)
	}
	st, _, err := openStore(context.Background(), &config{dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Setenv("STUDIO_TOKEN", "")
	cfg := &config{dataDir: dir, addr: "127.0.0.1:1"} // nothing listens on port 1
	rep, source, down, err := doctorReport(t.Context(), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if down == nil || exitCode(exitError{exitUnreachable, down}) != exitUnreachable {
		t.Fatalf("doctor did not report the daemon down: %v", down)
	}
	if rep.Status != app.StatusOK || rep.Database.QuickCheck != "ok" || rep.Model.Configured || !strings.Contains(source, "directly") {
		t.Fatalf("report = %+v from %s", rep, source)
	}
	var out bytes.Buffer
	printDoctor(&out, rep, source)
	for _, want := range []string{"status:     ok", "studio.db, schema version", "not checked: the daemon is not running", "indeterminate proposals: none"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, _, _, err := doctorReport(t.Context(), &config{dataDir: t.TempDir(), addr: "127.0.0.1:1"}, true); err == nil {
		t.Fatal("doctor of an empty data dir found a database")
	}
}
