package main

import (
	"encoding/json"
	"math"
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
		"--conversations", "1,8", "--latency", "20@200,4@100/1x8192,5@300/5,20@2000", "--idle", "40", "--replay", "1200", "--text-flush", "20ms")
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
	if len(res.Latency) != 5 || res.Latency[4].TokenP99Ms <= 0 {
		t.Fatalf("latency not measured: %+v", res.Latency)
	}
	// The frame runs: 10 small-token streams per conversation; 1 per
	// conversation with 8 KiB tokens; 1 conversation -> 5 streams; saturation.
	for i, want := range []struct{ streams, perConv, bytes int }{{20, 10, stampBytes}, {4, 1, 8192}, {5, 5, stampBytes}, {20, 10, stampBytes}} {
		l := res.Latency[i]
		if l.Streams != want.streams || l.StreamsPerConv != want.perConv || l.FrameBytes != want.bytes || l.Conversations != want.streams/want.perConv {
			t.Errorf("run %d: %+v, want %d streams, %d per conversation, %d-byte tokens", i, l, want.streams, want.perConv, want.bytes)
		}
		if l.Frames == 0 || l.FrameP50Ms <= 0 || l.FrameP99Ms <= 0 || l.FramesPerSec <= 0 || l.DeliveriesSec <= 0 || l.OfferedSec <= 0 {
			t.Errorf("run %d not measured: %+v", i, l)
		}
	}
}

func TestParseLatencyRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec                  string
		convs, perConv, bytes int
		offered               float64
	}{
		{"100@1000", 10, 10, stampBytes, 1000},
		{"10000@2000", 1000, 10, stampBytes, 2000},
		{"100@20000/1x8192", 100, 1, 8192, 20000},
		{"100@1000/100", 1, 100, stampBytes, 1000},
		{"1000@50000", 100, 10, stampBytes, 50000},
		{"5@100", 1, 5, stampBytes, 100},               // fewer streams than 10: one conversation
		{"1@4000/1x9000", 1, 1, 9000, 4000},            // 4 tokens per 1 ms step
		{"25@300/10", 2, 10, stampBytes, 2 * 1000 / 7}, // the script's whole-millisecond pace
	} {
		r, err := parseLatencyRun(tc.spec)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		if r.convs != tc.convs || r.perConv != tc.perConv || r.bytes != tc.bytes || math.Abs(r.offered()-tc.offered) > 1 {
			t.Errorf("%s: %d conversations x %d streams, %d bytes, %.0f/s offered; want %d x %d, %d, %.0f",
				tc.spec, r.convs, r.perConv, r.bytes, r.offered(), tc.convs, tc.perConv, tc.bytes, tc.offered)
		}
	}
	for _, spec := range []string{"", "100", "100@", "@100", "0@100", "100@0", "100@-5", "100@1000/0", "100@1000/101", "100@1000/x", "100@1000x20", "100@1000xx", "100@1000/1x"} {
		if _, err := parseLatencyRun(spec); err == nil {
			t.Errorf("%q: no error", spec)
		}
	}
	// The defaults carry the runs of issue 12's table.
	runs, err := latencyRuns(benchOptions{latency: defaultLatencyRuns})
	if err != nil {
		t.Fatal(err)
	}
	var hundredBy1Big, oneTo100, saturation bool
	for _, r := range runs {
		hundredBy1Big = hundredBy1Big || r.convs == 100 && r.perConv == 1 && r.bytes == 8192
		oneTo100 = oneTo100 || r.convs == 1 && r.perConv == 100
		saturation = saturation || r.convs*r.perConv == 1000 && r.offered() >= 30000
	}
	if !hundredBy1Big || !oneTo100 || !saturation {
		t.Errorf("default runs %+v: 100 x 1 with 8 KiB %v, 1 -> 100 %v, saturation at 1 000 streams %v", runs, hundredBy1Big, oneTo100, saturation)
	}
}
