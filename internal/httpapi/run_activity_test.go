package httpapi_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

func unix(t time.Time) string { return strconv.FormatFloat(protocol.Timestamp(t), 'f', -1, 64) }

// TestRunActivityAPI: buckets between the caller's edges, by status, and
// the duration spread's bins; bad edges are validation errors.
func TestRunActivityAPI(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	d.seed()
	now := d.clock.Now()
	edges := unix(now.Add(-2*time.Hour)) + "," + unix(now.Add(-time.Hour)) + "," + unix(now.Add(time.Hour))
	out := d.must("GET", "/api/app/runs/activity?edges="+edges, "", 200)
	buckets := out["buckets"].([]any)
	if len(buckets) != 2 || out["total"].(float64) != 1 || buckets[1].(map[string]any)["counts"].(map[string]any)["queued"].(float64) != 1 {
		t.Fatalf("activity: %v", out)
	}
	if bins := out["durations"].(map[string]any)["bins"].([]any); len(bins) != 6 || bins[5].(map[string]any)["maxMs"] != nil {
		t.Fatalf("duration bins: %v", out["durations"])
	}
	for _, bad := range []string{"", "1", "2,1", "a,b", "1,2,x"} {
		if status, out := d.call("GET", "/api/app/runs/activity?edges="+bad, ""); status != 400 || errCode(out) != "validation" {
			t.Errorf("edges=%q: %d %v", bad, status, out)
		}
	}
}

// TestOperatorActivityAPI: the System space's chart data counts the turns
// the coordinator ended, from its Observer hook.
func TestOperatorActivityAPI(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	c, err := d.client.CreateConversation(d.t.Context(), protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := d.client.SubmitTurn(d.t.Context(), c.ID, turnRequest("hello", c.LastSequence))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.client.Stream(d.t.Context(), c.ID, 0, func(f protocol.Frame) error {
		if f.Type == protocol.FrameDone && f.RequestID == acc.RequestID {
			return apiclient.ErrStopStream
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The Observer hears of the turn after its done frame is durable, so a
	// client may see done first: look again until it is counted.
	testutil.Eventually(t, func() bool {
		var turns float64
		for _, b := range d.must("GET", "/api/app/system/operator?window=24h", "", 200)["buckets"].([]any) {
			turns += b.(map[string]any)["turns"].(float64)
		}
		if turns > 1 {
			t.Fatalf("the operator's activity counts %v turns, want 1", turns)
		}
		return turns == 1
	}, "the operator's activity to count the turn")
	if status, _ := d.call("GET", "/api/app/system/operator?window=2d", ""); status != 400 {
		t.Fatalf("window=2d: %d", status)
	}
}
