package httpapi_test

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
)

// TestFleetOnTheServer: q searches playbook, input and id on the server; the
// first page counts by status what the other filters match; the cursor
// pages the rest; since/until bound the range.
func TestFleetOnTheServer(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	_, first := d.seed()
	var ids []string
	for i := range 3 {
		d.clock.Advance(time.Minute)
		r := d.must("POST", "/api/app/playbooks/notes/launch", fmt.Sprintf(`{"input":"ship v%d"}`, i), 202)
		ids = append(ids, r["id"].(string))
	}
	count := func(out map[string]any) int { return len(out["runs"].([]any)) }
	if out := d.must("GET", "/api/app/runs?counts=true&q=SHIP", "", 200); count(out) != 3 || out["total"].(float64) != 3 {
		t.Fatalf("q=SHIP: %v", out)
	}
	if out := d.must("GET", "/api/app/runs?q=audit", "", 200); count(out) != 1 || out["runs"].([]any)[0].(map[string]any)["id"] != first {
		t.Fatalf("q=audit: %v", out)
	}
	if out := d.must("GET", "/api/app/runs?q="+first[:8], "", 200); count(out) != 1 {
		t.Fatalf("q=id prefix: %v", out)
	}
	if out := d.must("GET", "/api/app/runs?q=SHIP", "", 200); out["counts"] != nil {
		t.Fatalf("counts without counts=true: %v", out)
	}
	// Counts ignore the status filter (they are the chips), not the others.
	out := d.must("GET", "/api/app/runs?counts=true&status=failed&q=ship", "", 200)
	if count(out) != 0 || out["counts"].(map[string]any)["queued"].(float64) != 3 {
		t.Fatalf("status=failed&q=ship: %v", out)
	}
	// Paging with the cursor: counts on the first page only.
	page := d.must("GET", "/api/app/runs?counts=true&limit=2", "", 200)
	if count(page) != 2 || page["nextCursor"] == nil || page["counts"] == nil {
		t.Fatalf("first page: %v", page)
	}
	next := d.must("GET", "/api/app/runs?counts=true&limit=2&cursor="+url.QueryEscape(page["nextCursor"].(string)), "", 200)
	if count(next) != 2 || next["counts"] != nil {
		t.Fatalf("second page: %v", next)
	}
	since := unix((d.clock.Now().Add(-90 * time.Second)))
	if out := d.must("GET", "/api/app/runs?counts=true&since="+since, "", 200); count(out) != 2 || out["total"].(float64) != 2 {
		t.Fatalf("since: %v", out)
	}
	if status, out := d.call("GET", "/api/app/runs?q="+url.QueryEscape(string(make([]byte, 300))), ""); status != 400 {
		t.Fatalf("a 300-byte q: %d %v", status, out)
	}
}

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

// TestAuditFiltersAPI: the audit trail by actor, command type, target and time.
func TestAuditFiltersAPI(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	pb, run := d.seed()
	events := func(q string) []any { return d.must("GET", "/api/app/audit?"+q, "", 200)["events"].([]any) }
	if n := len(events("actor=owner")); n != 5 {
		t.Fatalf("actor=owner: %d events", n)
	}
	if n := len(events("actor=studio_operator")); n != 0 {
		t.Fatalf("actor=studio_operator: %d events", n)
	}
	if es := events("commandType=launch_playbook"); len(es) != 1 {
		t.Fatalf("commandType=launch_playbook: %v", es)
	}
	if es := events("target=" + pb); len(es) != 2 { // created, launched
		t.Fatalf("target=playbook: %v", es)
	}
	_ = run
	later := unix((d.clock.Now().Add(time.Hour)))
	if es := events("since=" + later); len(es) != 0 {
		t.Fatalf("since the future: %v", es)
	}
	if status, out := d.call("GET", "/api/app/audit?commandType=nope", ""); status != 400 || errCode(out) != "validation" {
		t.Fatalf("commandType=nope: %d %v", status, out)
	}
}

// TestWorkflowLaunchAndDeleteAPI: a launch queues one run per step, each
// naming the workflow and its step, findable with ?workflow=; a delete
// removes the workflow and keeps its runs; both are audited.
func TestWorkflowLaunchAndDeleteAPI(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	d.seed()
	wf := d.must("POST", "/api/app/workflows", `{"name":"ship","steps":[{"playbook":"audit-repo","args":{"repo":"a"}},{"playbook":"notes","input":"v2"}]}`, 201)
	out := d.must("POST", "/api/app/workflows/ship/launch", `{}`, 202)
	runs := out["runs"].([]any)
	if len(runs) != 2 || runs[1].(map[string]any)["workflowStep"].(float64) != 1 || runs[0].(map[string]any)["workflowId"] != wf["id"] {
		t.Fatalf("launch: %v", out)
	}
	if listed := d.must("GET", "/api/app/runs?workflow="+wf["id"].(string), "", 200)["runs"].([]any); len(listed) != 2 {
		t.Fatalf("runs of the workflow: %v", listed)
	}
	if status, out := d.call("POST", "/api/app/workflows/release/launch", `{"workflow":"ship"}`); status != 400 {
		t.Fatalf("a body naming another workflow: %d %v", status, out)
	}
	if status, out := d.call("DELETE", "/api/app/workflows/ship?expectedVersion=2", ""); status != 409 || errCode(out) != "conflict" {
		t.Fatalf("delete at a stale version: %d %v", status, out)
	}
	res := d.must("DELETE", "/api/app/workflows/ship", "", 200)
	if res["deleted"] != true {
		t.Fatalf("delete: %v", res)
	}
	d.must("GET", "/api/app/workflows/ship", "", 404)
	if listed := d.must("GET", "/api/app/runs?workflow="+wf["id"].(string), "", 200)["runs"].([]any); len(listed) != 2 {
		t.Fatalf("the runs went with the workflow: %v", listed)
	}
	if es := d.must("GET", "/api/app/audit?commandType=launch_workflow", "", 200)["events"].([]any); len(es) != 1 {
		t.Fatalf("launch audit rows: %v", es)
	}
	if es := d.must("GET", "/api/app/audit?commandType=delete_workflow&target="+wf["id"].(string), "", 200)["events"].([]any); len(es) != 1 {
		t.Fatalf("delete audit rows: %v", es)
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
			return httpapi.ErrStopStream
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The Observer hears of the turn after its done frame is durable, so a
	// client may see done first: look again until it is counted.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var turns float64
		for _, b := range d.must("GET", "/api/app/system/operator?window=24h", "", 200)["buckets"].([]any) {
			turns += b.(map[string]any)["turns"].(float64)
		}
		if turns == 1 {
			break
		}
		if turns > 1 || time.Now().After(deadline) {
			t.Fatalf("the operator's activity counts %v turns, want 1", turns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if status, _ := d.call("GET", "/api/app/system/operator?window=2d", ""); status != 400 {
		t.Fatalf("window=2d: %d", status)
	}
}
