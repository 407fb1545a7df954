package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
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
	// A daemon's instance with a turn it runs, and one that stopped.
	now := time.Now()
	for _, id := range []string{"live-instance", "stopped-instance"} {
		if _, err := st.RegisterInstance(t.Context(), store.RegisterInstanceParams{Instance: store.Instance{ID: id, Address: "http://127.0.0.1:8765",
			PID: 42, Version: "v1", StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now.Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.StopInstance(t.Context(), store.StopInstanceParams{ID: "stopped-instance", Now: now}); err != nil {
		t.Fatal(err)
	}
	conv, err := st.CreateConversation(t.Context(), store.CreateConversationParams{ID: "c1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SubmitTurn(t.Context(), store.SubmitTurnParams{ConversationID: conv.ID, RequestID: "r1", Instruction: "x",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: now, Instance: "live-instance"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Setenv("STUDIO_TOKEN", "")
	cfg := &config{dataDir: dir, addr: "127.0.0.1:1"} // nothing listens on port 1
	rep, source, down, err := doctorReport(t.Context(), cfg, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if down == nil || exitCode(exitError{exitUnreachable, down}) != exitUnreachable {
		t.Fatalf("doctor did not report the daemon down: %v", down)
	}
	if rep.Status != studio.StatusOK || rep.Database.QuickCheck != "ok" || rep.Model.Configured || !strings.Contains(source, "directly") {
		t.Fatalf("report = %+v from %s", rep, source)
	}
	var out bytes.Buffer
	printDoctor(&out, rep, source)
	for _, want := range []string{"status:     ok", "studio.db, schema version", "not checked: the daemon is not running", "indeterminate proposals: none",
		"instances:  1 live, 0 expired\n", "live-instance  live", "stopped-instance  stopped", "turn r1  queued  owned by live-instance (live)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, _, _, err := doctorReport(t.Context(), &config{dataDir: t.TempDir(), addr: "127.0.0.1:1"}, true, 0); err == nil {
		t.Fatal("doctor of an empty data dir found a database")
	}
}

// TestDoctorSecrets: a database an older daemon left with a secret in a
// turn's instruction, its frame and its search document: doctor --secrets
// finds it (an error: exit 1), --secrets --redact hides it in one audited
// transaction, and then no byte of the SQLite files holds it.
func TestDoctorSecrets(t *testing.T) {
	t.Parallel()
	const secret = "ghp_Qm2Lp9Rt4Vw1Zb8Nc3Jd6Kf0Hg5Se2Ua7Ib4"
	dir := t.TempDir()
	cfg := &config{dataDir: dir}
	st, _, err := openStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	conv, err := st.CreateConversation(t.Context(), store.CreateConversationParams{ID: "c1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SubmitTurn(t.Context(), store.SubmitTurnParams{ConversationID: conv.ID, RequestID: "r1", Instruction: "push with " + secret,
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.FinishTurn(t.Context(), store.FinishTurnParams{RequestID: "r1", Status: store.TurnCompleted, Now: now}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	held := func() bool {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Contains(b, []byte(secret)) {
				return true
			}
		}
		return false
	}
	if !held() {
		t.Fatal("the secret was never written: the test proves nothing")
	}
	o := &output{format: formatTable}
	var out bytes.Buffer
	if err := doctorSecrets(t.Context(), cfg, false, o, &out); err == nil || !strings.Contains(out.String(), "studio_operator_turns") {
		t.Fatalf("doctor --secrets: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := doctorSecrets(t.Context(), cfg, true, o, &out); err != nil {
		t.Fatalf("doctor --secrets --redact: %v\n%s", err, out.String())
	}
	if held() {
		t.Fatal("a byte of the database files still holds the secret")
	}
	st, err = openDatabase(t.Context(), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, err := st.ListAdminEvents(t.Context(), store.ListAdminEventsParams{Action: ActionSecretsRedacted, Limit: 5})
	if err != nil || len(events) != 1 {
		t.Fatalf("audit: %v %v", events, err)
	}
	out.Reset()
	if err := doctorSecrets(t.Context(), cfg, false, o, &out); err != nil || !strings.Contains(out.String(), "none found") {
		t.Fatalf("after --redact: %v\n%s", err, out.String())
	}
}
