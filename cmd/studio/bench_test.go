package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/bench"
)

// TestProcessBenchQuick runs `studio bench` small, end to end (its own
// daemon process, real SQLite files, loopback streams), and checks that
// every figure was measured, and that idle streams made no store read.
func TestProcessBenchQuick(t *testing.T) {
	t.Parallel()
	res := runBenchJSON(t, nil, "--conversations", "1,8", "--latency", "20@200,4@100/1x8192,5@300/5,20@2000", "--idle", "40", "--replay", "1200", "--text-flush", "20ms")
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

// TestProcessBenchPostgres runs `studio bench --database` small against a
// throwaway PostgreSQL server: the appends and the daemons run on it,
// PostgreSQL's commit rate is measured in the same run and the appends are
// reported against it, and a second daemon's streams time frames committed
// by the first.
func TestProcessBenchPostgres(t *testing.T) {
	t.Parallel()
	url := postgresServer(t).NewDatabase(t, "")
	// The flag alone selects the database.
	res := runBenchJSON(t, []string{"STUDIO_DATABASE_URL="}, "--database", url,
		"--conversations", "1,4", "--latency", "10@200", "--cross-daemon", "2@100/1", "--idle", "10", "--replay", "600", "--text-flush", "20ms")
	if res.Backend != "postgres" || res.Postgres == nil {
		t.Fatalf("backend %q, postgres %+v: want the PostgreSQL rows", res.Backend, res.Postgres)
	}
	if pg := res.Postgres; pg.CommitsPerSec <= 0 || pg.PoolCommitsPerSec <= 0 || pg.PoolConns != bench.ProbeConns {
		t.Fatalf("commit probe not measured: %+v", pg)
	}
	if len(res.Appends) != 4 {
		t.Fatalf("appends: %+v, want 4 runs", res.Appends)
	}
	for i, a := range res.Appends {
		if a.PerSec <= 0 || a.RatioToCommits <= 0 || a.RatioToPoolCommits <= 0 {
			t.Errorf("appends run %d not measured against PostgreSQL's commits: %+v", i, a)
		}
	}
	// The appends went to PostgreSQL, not to SQLite files.
	conn, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var frames int
	if err := conn.QueryRow(testCtx(t), `SELECT count(*) FROM studio_operator_frames`).Scan(&frames); err != nil {
		t.Fatal(err)
	}
	if frames < 600 {
		t.Errorf("%d frames in PostgreSQL, want the runs' (at least the 600 replayed)", frames)
	}
	if len(res.Latency) != 2 || res.Latency[0].Frames == 0 || res.Latency[0].FrameP99Ms <= 0 || res.Latency[1].TokenP99Ms <= 0 {
		t.Fatalf("latency not measured: %+v", res.Latency)
	}
	if res.Replay.StreamPerSec <= 0 || res.Idle.Streams != 10 {
		t.Fatalf("replay or idle not measured: %+v %+v", res.Replay, res.Idle)
	}
	if x := res.CrossDaemon; x == nil || x.Streams != 2 || x.StreamsPerConv != 1 || x.Frames == 0 || x.FrameP50Ms <= 0 || x.FrameP99Ms <= 0 {
		t.Fatalf("cross-daemon run not measured: %+v", x)
	}
	// Only the two daemons listen while it runs: every listener is woken
	// by every commit, and one more (the bench's own store) competes with
	// the receiving daemon's.
	if x := res.CrossDaemon; x.Listeners != 2 {
		t.Errorf("%d sessions listening on the database during the cross-daemon run, want the two daemons'", x.Listeners)
	}
}

// runBenchJSON runs `studio bench --json` for a second a run in a
// temporary directory, with env added to this process's, and decodes its
// result.
func runBenchJSON(t *testing.T, env []string, args ...string) bench.Result {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), bin, append([]string{"bench", "--json", "--dir", t.TempDir(), "--duration", "1s", "--warm-up", "200ms"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
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
	return res
}
