package studio

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Runs over time for the Mission charts, counted by the store: runs per
// bucket by status, and the spread of durations of the runs that ran.

// MaxQueryLength bounds a text search.
const MaxQueryLength = 200

// MaxActivityBuckets bounds one activity query.
const MaxActivityBuckets = 48

// DurationBin is one bin of the duration spread: [MinMs, MaxMs), MaxMs nil
// for the open last bin.
type DurationBin struct {
	Label string `json:"label"`
	MinMs int64  `json:"minMs"`
	MaxMs *int64 `json:"maxMs"`
	Count int64  `json:"count"`
}

// durationBins are the spread's bins: upper bounds and labels.
var durationBins = []struct {
	upper time.Duration
	label string
}{
	{time.Second, "< 1 s"}, {5 * time.Second, "1–5 s"}, {30 * time.Second, "5–30 s"},
	{2 * time.Minute, "30 s–2 min"}, {10 * time.Minute, "2–10 min"}, {0, "≥ 10 min"},
}

// ActivityBucket counts the runs created in [Start, End) by status.
type ActivityBucket struct {
	Start  float64          `json:"start"`
	End    float64          `json:"end"`
	Counts map[string]int64 `json:"counts"`
	Total  int64            `json:"total"`
}

// Activity is GET /api/app/runs/activity.
type Activity struct {
	Buckets   []ActivityBucket `json:"buckets"`
	Total     int64            `json:"total"`
	Durations struct {
		Bins     []DurationBin `json:"bins"`
		Count    int64         `json:"count"`
		MedianMs *int64        `json:"medianMs"`
		P90Ms    *int64        `json:"p90Ms"`
	} `json:"durations"`
}

// RunActivity counts the runs created between consecutive edges (the
// caller's hours or days, in its own time zone: 2 to 49 increasing
// instants) by status, and the duration spread of those that ran.
func (s *Service) RunActivity(ctx context.Context, edges []time.Time) (Activity, error) {
	if len(edges) < 2 || len(edges) > MaxActivityBuckets+1 {
		return Activity{}, protocol.Errorf(protocol.Validation, "edges needs 2 to %d increasing times", MaxActivityBuckets+1).With("field", "edges")
	}
	for i := 1; i < len(edges); i++ {
		if !edges[i].After(edges[i-1]) {
			return Activity{}, protocol.Errorf(protocol.Validation, "edges must increase").With("field", "edges")
		}
	}
	bounds := make([]time.Duration, 0, len(durationBins)-1)
	for _, b := range durationBins[:len(durationBins)-1] {
		bounds = append(bounds, b.upper)
	}
	a, err := s.store.RunActivity(ctx, store.RunActivityParams{Edges: edges, DurationBounds: bounds})
	if err != nil {
		return Activity{}, err
	}
	var out Activity
	out.Total = a.Total
	for i, b := range a.Buckets {
		ab := ActivityBucket{Start: stamp(edges[i]), End: stamp(edges[i+1]), Counts: map[string]int64{}}
		for st, n := range b {
			ab.Counts[string(st)] = n
			ab.Total += n
		}
		out.Buckets = append(out.Buckets, ab)
	}
	var lower time.Duration
	for j, b := range durationBins {
		bin := DurationBin{Label: b.label, MinMs: lower.Milliseconds(), Count: a.Durations[j]}
		if b.upper > 0 {
			ms := b.upper.Milliseconds()
			bin.MaxMs = &ms
		}
		out.Durations.Bins = append(out.Durations.Bins, bin)
		lower = b.upper
	}
	out.Durations.Count = a.Finished
	out.Durations.MedianMs, out.Durations.P90Ms = millis(a.Median), millis(a.P90)
	return out, nil
}

func millis(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}
