package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// completeTurn submits instruction after the conversation's last frame and
// streams until its done frame; it returns every frame the stream showed.
func completeTurn(t *testing.T, ctx context.Context, d *daemon, convID, instruction string, last int64) []protocol.Frame {
	t.Helper()
	r := completeTurnErr(ctx, d, convID, instruction, last)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.frames
}

// turnFrames are the frames a client saw of one turn, or why it could not.
type turnFrames struct {
	frames []protocol.Frame
	err    error
}

// completeTurnErr is completeTurn for a goroutine other than the test's.
func completeTurnErr(ctx context.Context, d *daemon, convID, instruction string, last int64) turnFrames {
	acc, err := d.client.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		return turnFrames{err: err}
	}
	var seen []protocol.Frame
	err = d.client.Stream(ctx, convID, last, func(f protocol.Frame) error {
		seen = append(seen, f)
		if f.Type == protocol.FrameDone && f.RequestID == acc.RequestID {
			return apiclient.ErrStopStream
		}
		return nil
	})
	return turnFrames{frames: seen, err: err}
}

// frameKeys lists (conversation, sequence, type) of the frames in the
// SQLite file at path, after checking its integrity.
func frameKeys(t *testing.T, ctx context.Context, path string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check of %s = %q, %v", path, check, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT conversation_id, sequence, frame_type FROM studio_operator_frames`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	keys := map[string]bool{}
	for rows.Next() {
		var conv, typ string
		var seq int64
		if err := rows.Scan(&conv, &seq, &typ); err != nil {
			t.Fatal(err)
		}
		keys[fmt.Sprintf("%s/%d/%s", conv, seq, typ)] = true
	}
	return keys
}

// TestProcessBackupAndRestore: studio backup beside a running daemon with
// a turn in flight copies every frame a client saw into a sound file;
// studio restore is refused while the daemon runs and for a corrupt file;
// once the daemon stops, the backup is restored and served.
func TestProcessBackupAndRestore(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	scriptPath := writeScript(t, slowScript)
	d := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	ctx := testCtx(t)
	env := []string{"STUDIO_DATA_DIR=" + dataDir, "STUDIO_DATABASE_URL="}

	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []protocol.Frame
	for i := range 3 {
		seen = append(seen, completeTurn(t, ctx, d, conv.ID, fmt.Sprintf("hello %d", i), int64(len(seen)))...)
	}
	// A turn in flight: its first text is committed, the rest never comes.
	busy, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := d.client.SubmitTurn(ctx, busy.ID, protocol.TurnRequest{Instruction: "slow",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	err = d.client.Stream(ctx, busy.ID, 0, func(f protocol.Frame) error {
		seen = append(seen, f)
		if p, ok := f.Payload.(protocol.TextPayload); ok && strings.TrimSpace(p.Content) == "thinking" {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	backup := filepath.Join(t.TempDir(), "studio-backup.db")
	if out, errOut, code := runStudio(t, env, "backup", backup); code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	keys := frameKeys(t, ctx, backup)
	for _, f := range seen {
		if k := fmt.Sprintf("%s/%d/%s", f.ConversationID, f.Sequence, f.Type); !keys[k] {
			t.Fatalf("the backup lacks frame %s that a client saw", k)
		}
	}
	if _, errOut, code := runStudio(t, env, "backup", backup); code == 0 || !strings.Contains(errOut, "exists") {
		t.Fatalf("backup over an existing file: exit %d %s", code, errOut)
	}

	// Written after the backup: the restore takes it away.
	later, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runStudio(t, env, "restore", backup); code == 0 || !strings.Contains(errOut, "restore refused") ||
		!strings.Contains(errOut, "holds the data directory") {
		t.Fatalf("restore beside a running daemon: exit %d %s", code, errOut)
	}
	d.kill()
	<-d.exited

	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096; i < len(b) && i < 4*4096; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(corrupt, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runStudio(t, env, "restore", corrupt); code == 0 || !strings.Contains(errOut, "restore refused") {
		t.Fatalf("restore of a corrupt file: exit %d %s", code, errOut)
	}
	out, errOut, code := runStudio(t, env, "restore", backup)
	if code != 0 || !strings.Contains(out, "restored") || !strings.Contains(out, "before-restore") {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}

	d2 := startDaemon(t, dataDir, "--model", "script:"+scriptPath)
	// Ready: the restored database answers at this binary's schema.
	if out, errOut, code := runStudio(t, env, "healthz", "--ready", "--server", d2.URL); code != 0 || strings.TrimSpace(out) != "ready" {
		t.Fatalf("healthz --ready after the restore: exit %d %s%s", code, out, errOut)
	}
	page, err := d2.client.GetConversation(ctx, conv.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if page.LatestSequence != int64(len(framesOf(seen, conv.ID))) {
		t.Fatalf("restored conversation ends at %d, want %d", page.LatestSequence, len(framesOf(seen, conv.ID)))
	}
	if _, err := d2.client.GetConversation(ctx, later.ID, 0, 1); err == nil {
		t.Fatal("a conversation created after the backup survived the restore")
	}
	// The restored database takes new turns.
	completeTurn(t, ctx, d2, conv.ID, "after restore", page.LatestSequence)
}

// framesOf is the frames of seen in conversation id.
func framesOf(seen []protocol.Frame, id string) []protocol.Frame {
	var out []protocol.Frame
	for _, f := range seen {
		if f.ConversationID == id {
			out = append(out, f)
		}
	}
	return out
}

// TestProcessBackupOnPostgresSaysPgDump: backup and restore name the
// PostgreSQL tools instead of doing anything.
func TestProcessBackupOnPostgresSaysPgDump(t *testing.T) {
	t.Parallel()
	env := []string{"STUDIO_DATA_DIR=" + t.TempDir(), "STUDIO_DATABASE_URL=postgres://studio@127.0.0.1:1/studio"}
	for _, cmd := range []string{"backup", "restore"} {
		_, errOut, code := runStudio(t, env, cmd, filepath.Join(t.TempDir(), "x.db"))
		if code == 0 || !strings.Contains(errOut, "pg_dump") || !strings.Contains(errOut, "pg_restore") {
			t.Fatalf("%s on PostgreSQL: exit %d %s", cmd, code, errOut)
		}
	}
}
