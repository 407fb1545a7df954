package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// Continuous replication with Litestream (docs/operating.md, "Continuous
// replication (Litestream)"): a replica of a daemon's database under load restores to
// a sound database holding every frame a client saw. It needs a litestream
// binary: STUDIO_LITESTREAM names one, else litestream on PATH; without
// one the test skips (CI does not build it: it takes many minutes).

func litestreamBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("STUDIO_LITESTREAM"); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("litestream")
	if err != nil {
		t.Skip("no litestream binary (set STUDIO_LITESTREAM or put litestream on PATH; go install github.com/benbjohnson/litestream/cmd/litestream@v0.5.18)")
	}
	return bin
}

// fiveTextsScript answers every turn with five text deltas.
const fiveTextsScript = `{"turns":[{"steps":[{"text":"one "},{"text":"two "},{"text":"three "},{"text":"four "},{"text":"five"}]}]}`

func TestProcessLitestreamReplicaRestores(t *testing.T) {
	t.Parallel()
	bin := litestreamBinary(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		// docs/operating.md's setting: checkpoints are Litestream's alone.
		{"autocheckpoint-off", []string{"--sqlite-wal-autocheckpoint", "0"}},
		// SQLite's default PASSIVE autocheckpoint beside Litestream's.
		{"sqlite-default", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			replicateUnderLoad(t, bin, tc.args)
		})
	}
}

func replicateUnderLoad(t *testing.T, bin string, args []string) {
	dataDir, replica := t.TempDir(), t.TempDir()
	d := startDaemon(t, dataDir, append([]string{"--model", "script:" + writeScript(t, fiveTextsScript), "--text-flush", "1ms"}, args...)...)
	ctx := testCtx(t)

	config := filepath.Join(t.TempDir(), "litestream.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `dbs:
  - path: %s
    monitor-interval: 100ms
    replica:
      type: file
      path: %s
      sync-interval: 100ms
`, filepath.Join(dataDir, "studio.db"), replica), 0o600); err != nil {
		t.Fatal(err)
	}
	var lsOut bytes.Buffer
	ls := exec.Command(bin, "replicate", "-config", config)
	ls.Stdout, ls.Stderr = &lsOut, &lsOut
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	lsDone := make(chan struct{})
	go func() { _ = ls.Wait(); close(lsDone) }()
	t.Cleanup(func() { _ = ls.Process.Signal(syscall.SIGTERM); <-lsDone })
	// The load starts once replication has (its first snapshot is there).
	restore := func(out string) ([]byte, error) {
		return exec.CommandContext(ctx, bin, "restore", "-o", out, "file://"+replica).CombinedOutput()
	}
	for i := 0; ; i++ {
		if _, err := restore(filepath.Join(t.TempDir(), "first.db")); err == nil {
			break
		}
		select {
		case <-lsDone:
			t.Fatalf("litestream replicate exited:\n%s", lsOut.String())
		case <-ctx.Done():
			t.Fatalf("litestream never wrote a replica:\n%s", lsOut.String())
		case <-time.After(100 * time.Millisecond): // poll for the condition
		}
	}

	// Load: four clients, each its own conversation, 25 turns each;
	// halfway, the daemon's own WAL checkpoint (maintenance).
	const clients, turns = 4, 25
	var mu sync.Mutex
	var seen []protocol.Frame
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for i := range turns {
				fs := completeTurnErr(ctx, d, conv.ID, fmt.Sprintf("turn %d", i), last)
				if fs.err != nil {
					errs <- fs.err
					return
				}
				last = fs.frames[len(fs.frames)-1].Sequence
				mu.Lock()
				seen = append(seen, fs.frames...)
				mu.Unlock()
			}
		}()
	}
	var checkpoint studio.MaintenanceResult
	if err := d.client.Do(ctx, "POST", "/api/app/system/maintenance", map[string]string{"action": "checkpoint"}, &checkpoint); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("maintenance checkpoint beside litestream: ok %v, busy %v; %d frames seen", checkpoint.OK, checkpoint.Busy, len(seen))

	// Restore until the replica has caught up with what the clients saw;
	// every restored copy must be sound (frameKeys checks integrity).
	deadline := time.Now().Add(60 * time.Second) // a safety net only
	for i := 0; ; i++ {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("restored-%d.db", i))
		if b, err := restore(out); err != nil {
			t.Fatalf("litestream restore: %v\n%s\nreplicate:\n%s", err, b, lsOut.String())
		}
		keys := frameKeys(t, ctx, out)
		missing := 0
		for _, f := range seen {
			if !keys[fmt.Sprintf("%s/%d/%s", f.ConversationID, f.Sequence, f.Type)] {
				missing++
			}
		}
		if missing == 0 {
			t.Logf("restore %d holds all %d frames", i, len(seen))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d restores the replica still lacks %d of %d frames a client saw\nreplicate:\n%s", i+1, missing, len(seen), lsOut.String())
		}
		time.Sleep(200 * time.Millisecond) // litestream syncs every 100 ms; poll, not a fixed wait for a result
	}
}
