package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Measurements of several daemons on one PostgreSQL, with the
// built binary and a real server:
//
//	go test ./cmd/studio -run '^$' -bench Cluster -benchtime 3x
//
// They report, not assert: a loaded machine changes the numbers.

// BenchmarkClusterFailover measures the time from kill -9 of the daemon
// that runs a turn to that turn's done frame on a client of another
// daemon, with the default lease (renewed every 2 s, expiring after 10 s)
// and with the tests' short one. Each iteration is one kill; run it with
// -benchtime 3x for min/median/max of three.
func BenchmarkClusterFailover(b *testing.B) {
	for _, lease := range []struct{ name, renew, expiry string }{
		{"default", "2s", "10s"},
		{"short", "200ms", "2s"},
	} {
		b.Run(lease.name, func(b *testing.B) {
			script := writeScript(b, slowScript)
			var took []time.Duration
			for b.Loop() {
				c := newCluster(b, 2, "--model", "script:"+script, "--lease-renew", lease.renew, "--lease-expiry", lease.expiry)
				a, other := c.ds[0], c.ds[1]
				ctx := testCtx(b)
				_, acc, onOther := slowTurn(b, ctx, a, other)
				killed := time.Now()
				a.kill()
				done := onOther.waitFor(b, ctx, "the turn ended", doneOf(acc.RequestID))
				took = append(took, done.at.Sub(killed))
			}
			reportSpread(b, "failover", took)
		})
	}
}

// BenchmarkClusterFrameLatency measures the time from a frame's commit on
// daemon A (its createdAt, stamped just before the commit) to its arrival
// at a client streaming from daemon C: PostgreSQL's NOTIFY, C's read and
// its SSE write. 100 text frames per iteration, 10 ms apart.
func BenchmarkClusterFrameLatency(b *testing.B) {
	var steps []string
	for i := range 100 {
		steps = append(steps, fmt.Sprintf(`{"text":"t%d "},{"sleepMs":10}`, i))
	}
	script := writeScript(b, `{"turns":[{"steps":[`+strings.Join(steps, ",")+`]}]}`)
	c := newCluster(b, 3, "--model", "script:"+script, "--text-flush", "1ms")
	a, cc := c.ds[0], c.ds[2]
	var lat []time.Duration
	for b.Loop() {
		ctx := testCtx(b)
		conv := newConversation(b, ctx, a)
		onC := follow(b, cc, conv.ID, 0)
		acc := submit(b, ctx, a, conv.ID, "stream")
		onC.waitFor(b, ctx, "the turn's end", doneOf(acc.RequestID))
		for _, f := range onC.all() {
			if f.Type == protocol.FrameText && f.RequestID == acc.RequestID {
				lat = append(lat, f.at.Sub(protocol.Time(float64(f.CreatedAt))))
			}
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lat)), "frames")
	b.Logf("commit on A to client on C over %d frames: p50 %s, p99 %s, max %s", len(lat), pct(0.50), pct(0.99), lat[len(lat)-1])
}

// reportSpread reports min, median and max of ds in seconds.
func reportSpread(b *testing.B, what string, ds []time.Duration) {
	b.Helper()
	slices.Sort(ds)
	b.ReportMetric(ds[0].Seconds(), what+"-min-s")
	b.ReportMetric(ds[len(ds)/2].Seconds(), what+"-median-s")
	b.ReportMetric(ds[len(ds)-1].Seconds(), what+"-max-s")
	b.Logf("%s over %d: %v", what, len(ds), ds)
}
