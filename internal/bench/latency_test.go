package bench

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
)

func TestParseLatencyRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec                  string
		convs, perConv, bytes int
		offered               float64
	}{
		{"100@1000", 10, 10, StampBytes, 1000},
		{"10000@2000", 1000, 10, StampBytes, 2000},
		{"100@20000/1x8192", 100, 1, 8192, 20000},
		{"100@1000/100", 1, 100, StampBytes, 1000},
		{"1000@50000", 100, 10, StampBytes, 50000},
		{"5@100", 1, 5, StampBytes, 100},               // fewer streams than 10: one conversation
		{"1@4000/1x9000", 1, 1, 9000, 4000},            // 4 tokens per 1 ms step
		{"25@300/10", 2, 10, StampBytes, 2 * 1000 / 7}, // the script's whole-millisecond pace
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
	// The defaults carry the runs docs/benchmarks.md reports.
	runs, err := latencyRuns(Options{Latency: DefaultLatencyRuns})
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

// TestWindow: latencies are those of what was sent within the window,
// the start-up and the end left out, late arrivals kept; the delivery rate
// counts only what arrived in the window, over its span, whatever came
// before (turns still being submitted) or after (a tail catching up).
func TestWindow(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	streams := [][]arrival{
		// Start-up: read and sent before the window.
		{{at(50), ms(1)}, {at(500), ms(2)}, {at(1500), ms(3)}},
		// Sent at 1.9 s (read in the window: counted, not timed), 2.5 s,
		// 9.9 s, 9.5 s (read late: timed, not counted) and 10.5 s (after
		// the window: neither).
		{{at(2000), ms(100)}, {at(2503), ms(3)}, {at(9999), ms(99)}, {at(12000), ms(2500)}, {at(10600), ms(100)}},
	}
	// The window from 2 s to 10 s: three arrivals in 8 s.
	lat, perSec := window(streams, at(2000), at(10000))
	want := []time.Duration{ms(3), ms(99), ms(2500)}
	if len(lat) != len(want) {
		t.Fatalf("latencies %v, want %v", lat, want)
	}
	for i, d := range lat {
		if d != want[i] {
			t.Errorf("latency %d = %v, want %v", i, d, want[i])
		}
	}
	if perSec != 3.0/8 {
		t.Errorf("%v deliveries/s, want 0.375 (3 in the 8 s window)", perSec)
	}
	if _, perSec := window(streams, at(10000), at(9000)); perSec != 0 {
		t.Errorf("an empty window: %v deliveries/s, want 0", perSec)
	}
}

// TestTokenRun: the token -> screen run repeats the first latency run
// coalesced with --text-flush; --text-flush 0 leaves it out, so that a
// script timing the frame runs alone does not pay for it.
func TestTokenRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flush  time.Duration
		tokens int
	}{{50 * time.Millisecond, 1}, {0, 0}} {
		runs, err := latencyRuns(Options{Latency: []string{"1000@2000/1", "10000@2000/1"}, TextFlush: tc.flush})
		if err != nil {
			t.Fatal(err)
		}
		var tokens []benchLatency
		for _, r := range runs {
			if r.textFlush {
				tokens = append(tokens, r)
			}
		}
		if len(runs)-len(tokens) != 2 || len(tokens) != tc.tokens {
			t.Errorf("--text-flush %s: %d frame runs and %d token runs, want 2 and %d", tc.flush, len(runs)-len(tokens), len(tokens), tc.tokens)
		}
		if len(tokens) == 1 && (tokens[0].convs != 1000 || tokens[0].perConv != 1) {
			t.Errorf("--text-flush %s: the token run is %+v, want the first run's load", tc.flush, tokens[0])
		}
	}
}

// TestBenchScriptCoversSubmission: a turn plays for the run's length and
// 20 ms per conversation of the run more, so that the window (opened once
// the last of 10 000 turns is submitted) has frames to measure however
// long the submissions took, up to that allowance.
func TestBenchScriptCoversSubmission(t *testing.T) {
	t.Parallel()
	runs, err := latencyRuns(Options{Latency: []string{"10000@2000/1", "10@100/1"}})
	if err != nil {
		t.Fatal(err)
	}
	const d = 75 * time.Second
	s := benchScript(t, runs, d)
	for i, r := range runs {
		var slept time.Duration
		for _, st := range turnFor(t, s, r.instruction(i, 0)).Steps {
			if st.SleepMs != nil {
				slept += time.Duration(*st.SleepMs) * time.Millisecond
			}
		}
		_, ms := r.pace()
		allowance := time.Duration(r.convs) * 20 * time.Millisecond
		if want := d + allowance; slept <= want-time.Duration(ms)*time.Millisecond {
			t.Errorf("run %d (%d conversations): the turn plays %s, want %s (the run's %s and %s to submit its turns)", i, r.convs, slept, want, d, allowance)
		}
	}
}

// benchScript is the script writeBenchScript writes for runs lasting d,
// read back as the daemon reads it.
func benchScript(t *testing.T, runs []benchLatency, d time.Duration) script.Script {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	if err := writeBenchScript(path, runs, d); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s script.Script
	if err := protocol.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// turnFor is the script's turn an instruction plays.
func turnFor(t *testing.T, s script.Script, instruction string) script.Turn {
	t.Helper()
	for _, turn := range s.Turns {
		if strings.Contains(instruction, turn.Match) {
			return turn
		}
	}
	t.Fatalf("no turn for %q", instruction)
	return script.Turn{}
}

// TestBenchScriptSpreadsTurns: the conversations of a run emit their
// first frames spread evenly over a period, as the peer's publishers
// offer the rate (two a millisecond at 1 000 streams x 2 000/s), not all
// at once whenever their turns were submitted together.
func TestBenchScriptSpreadsTurns(t *testing.T) {
	t.Parallel()
	runs, err := latencyRuns(Options{Latency: []string{"1000@2000/1", "10000@2000/1", "100@20000/1x8192", "10@100/1"}})
	if err != nil {
		t.Fatal(err)
	}
	s := benchScript(t, runs, 15*time.Second)
	for i, r := range runs {
		_, ms := r.pace()
		// Conversations whose first frame falls in each millisecond of
		// the period.
		perMs := make([]int, ms)
		for j := range r.convs {
			var first int64
			for _, st := range turnFor(t, s, r.instruction(i, j)).Steps {
				if st.Text != nil {
					break
				}
				if st.SleepMs != nil {
					first += *st.SleepMs
				}
			}
			if first >= ms {
				t.Fatalf("run %d: conversation %d starts %d ms late, past its %d ms period", i, j, first, ms)
			}
			perMs[first]++
		}
		even := (r.convs + int(ms) - 1) / int(ms) // conversations a millisecond, spread evenly
		if busiest := slices.Max(perMs); busiest > max(even, (r.convs+999)/1000) {
			t.Errorf("run %d (%d conversations, a frame each %d ms): %d of them start in one millisecond, want at most %d", i, r.convs, ms, busiest, even)
		}
	}
}
