package bench

import (
	"math"
	"testing"
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
	// The defaults carry the runs BENCHMARKS.md reports.
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
