package main

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/studio/operator/internal/bench"
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
		"--conversations", "1,8", "--latency", "20@200,4@100/1x8192,5@300/5,20@2000", "--idle", "40", "--replay", "1200", "--text-flush", "20ms")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	var res bench.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if res.FsyncPerSec <= 0 || len(res.Appends) != 4 || res.Appends[1].PerSec <= 0 || res.Appends[1].RatioToFsync <= 0 {
		t.Fatalf("fsync and appends not measured: %+v", res)
	}
	// The bandwidth probe, and 8 KiB frames by 8 conversations against it.
	if pl := res.Appends[2]; !pl.Pipelined || pl.Conversations != 1 || pl.PerSec <= 0 {
		t.Fatalf("pipelined appends not measured: %+v", pl)
	}
	if big := res.Appends[3]; res.DiskBytesPerSec <= 0 || big.FrameBytes != bench.BigFrame || big.Conversations != 8 || big.BytesPerSec <= 0 || big.RatioToDisk <= 0 {
		t.Fatalf("disk bandwidth or large appends not measured: %.0f B/s, %+v", res.DiskBytesPerSec, big)
	}
	if res.Idle.Streams != 40 || res.Idle.StoreReadsWhileIdle != 0 {
		t.Fatalf("idle: %+v, want 40 streams and no store read", res.Idle)
	}
	if res.Replay.StorePerSec <= 0 || res.Replay.StreamPerSec <= 0 {
		t.Fatalf("replay not measured: %+v", res.Replay)
	}
	if len(res.Latency) != 5 || res.Latency[4].TokenP99Ms <= 0 {
		t.Fatalf("latency not measured: %+v", res.Latency)
	}
	// The frame runs: 10 small-token streams per conversation; 1 per
	// conversation with 8 KiB tokens; 1 conversation -> 5 streams; saturation.
	for i, want := range []struct{ streams, perConv, bytes int }{{20, 10, bench.StampBytes}, {4, 1, 8192}, {5, 5, bench.StampBytes}, {20, 10, bench.StampBytes}} {
		l := res.Latency[i]
		if l.Streams != want.streams || l.StreamsPerConv != want.perConv || l.FrameBytes != want.bytes || l.Conversations != want.streams/want.perConv {
			t.Errorf("run %d: %+v, want %d streams, %d per conversation, %d-byte tokens", i, l, want.streams, want.perConv, want.bytes)
		}
		if l.Frames == 0 || l.BytesPerSec <= 0 || l.RatioToDisk <= 0 || l.FrameP50Ms <= 0 || l.FrameP99Ms <= 0 || l.FramesPerSec <= 0 || l.DeliveriesSec <= 0 || l.OfferedSec <= 0 {
			t.Errorf("run %d not measured: %+v", i, l)
		}
	}
}
