package main

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// TestProcessBenchQuick runs `studio bench` small, end to end (its own
// daemon process, real SQLite files, loopback streams), and checks that
// every figure was measured, and that idle streams made no store read.
func TestProcessBenchQuick(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), bin, "bench", "--json", "--dir", t.TempDir(), "--duration", "1s",
		"--conversations", "1,8", "--latency", "20@200", "--idle", "40", "--replay", "1200", "--text-flush", "20ms")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	var res benchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if res.FsyncPerSec <= 0 || len(res.Appends) != 2 || res.Appends[1].PerSec <= 0 || res.Appends[1].RatioToFsync <= 0 {
		t.Fatalf("fsync and appends not measured: %+v", res)
	}
	if res.Idle.Streams != 40 || res.Idle.StoreReadsWhileIdle != 0 {
		t.Fatalf("idle: %+v, want 40 streams and no store read", res.Idle)
	}
	if res.Replay.StorePerSec <= 0 || res.Replay.StreamPerSec <= 0 {
		t.Fatalf("replay not measured: %+v", res.Replay)
	}
	if len(res.Latency) != 2 || res.Latency[0].Frames == 0 || res.Latency[0].FrameP99Ms <= 0 || res.Latency[1].TokenP99Ms <= 0 {
		t.Fatalf("latency not measured: %+v", res.Latency)
	}
}
