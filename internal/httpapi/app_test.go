package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/turnstats"
)

// appDaemon is a daemon with the application API: SQLite file, coordinator,
// application service (not started: runs stay queued), HTTP server.
type appDaemon struct {
	t      *testing.T
	clock  *storetest.Clock
	store  *sqlite.Store
	coord  *coordinator.Coordinator
	convs  *conversations.Service
	svc    *studio.Service
	srv    *httptest.Server
	client *apiclient.Client
}

func newAppDaemon(t *testing.T) *appDaemon {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	if _, err := st.Migrate(context.Background(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := script.New(script.Script{Turns: []script.Turn{{Steps: []script.Step{{Text: ptrTo("Three runs failed today.")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	recent := turnstats.New(16, clock.Now)
	coord := coordinator.New(coordinator.Config{Store: st, Provider: p, Now: clock.Now, ShutdownGrace: time.Millisecond, TextFlush: time.Millisecond,
		Observer: recent})
	svc, err := studio.New(studio.Config{Store: st, Maintenance: st, Provider: p, Now: clock.Now, ShutdownGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The token is the bootstrap owner's, an admin principal: actors are "owner".
	if _, err := httpapi.EnsureOwner(context.Background(), st, testToken, clock.Now()); err != nil {
		t.Fatal(err)
	}
	convs := conversations.New(conversations.Config{Store: st, Engine: coord, Now: clock.Now})
	api := httpapi.New(withEngine(httpapi.Config{Token: testToken, App: svc, Recent: recent, Principals: st, Webhooks: st, Now: clock.Now}, coord, convs))
	srv := httptest.NewServer(api)
	d := &appDaemon{t: t, clock: clock, store: st, coord: coord, convs: convs, svc: svc, srv: srv,
		client: apiclient.New(srv.URL, testToken, srv.Client())}
	t.Cleanup(func() {
		api.Close()
		coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		srv.Close()
		st.Close()
	})
	return d
}

func ptrTo[T any](v T) *T { return &v }

// call sends one request with the token (unless token is "-") and returns
// the status and the body decoded as generic JSON.
func (d *appDaemon) call(method, path, body string) (int, map[string]any) {
	d.t.Helper()
	return d.callToken(method, path, body, testToken)
}

func (d *appDaemon) callToken(method, path, body, token string) (int, map[string]any) {
	d.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.srv.URL+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	var out map[string]any
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			d.t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, out
}

func (d *appDaemon) must(method, path, body string, want int) map[string]any {
	d.t.Helper()
	status, out := d.call(method, path, body)
	if status != want {
		d.t.Fatalf("%s %s = %d %v, want %d", method, path, status, out, want)
	}
	return out
}

// errCode is the code of an error body ("" for a success: a run also has
// an "error" member, but no error body has an "id").
func errCode(out map[string]any) string {
	if _, ok := out["id"]; ok {
		return ""
	}
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// seed creates the resources the table tests refer to.
func (d *appDaemon) seed() (playbookID, runID string) {
	d.t.Helper()
	pb := d.must("POST", "/api/app/playbooks", `{"name":"audit-repo","prompt":"Audit {{repo}}","args":[{"name":"repo","required":true}]}`, 201)
	d.must("POST", "/api/app/playbooks", `{"name":"notes","prompt":"Write notes"}`, 201)
	d.must("POST", "/api/app/schedules", `{"name":"nightly","cron":"0 2 * * *","playbook":"audit-repo","args":{"repo":"main"}}`, 201)
	d.must("POST", "/api/app/workflows", `{"name":"release","steps":[{"playbook":"notes"}]}`, 201)
	run := d.must("POST", "/api/app/playbooks/audit-repo/launch", `{"input":"repo x","args":{"repo":"x"}}`, 202)
	return pb["id"].(string), run["id"].(string)
}

var appRoutes = [][2]string{
	{"GET", "/api/app/playbooks"}, {"POST", "/api/app/playbooks"}, {"GET", "/api/app/playbooks/x"},
	{"PATCH", "/api/app/playbooks/x"}, {"DELETE", "/api/app/playbooks/x"}, {"POST", "/api/app/playbooks/x/launch"},
	{"GET", "/api/app/workflows"}, {"POST", "/api/app/workflows"}, {"GET", "/api/app/workflows/x"}, {"PATCH", "/api/app/workflows/x"}, {"DELETE", "/api/app/workflows/x"}, {"POST", "/api/app/workflows/x/launch"},
	{"GET", "/api/app/runs"}, {"POST", "/api/app/runs"}, {"GET", "/api/app/runs/stats"}, {"GET", "/api/app/runs/activity?edges=1,2"}, {"GET", "/api/app/runs/x"},
	{"POST", "/api/app/runs/x/cancel"}, {"POST", "/api/app/runs/x/retry"},
	{"GET", "/api/app/schedules"}, {"POST", "/api/app/schedules"}, {"GET", "/api/app/schedules/preview?cron=*+*+*+*+*"},
	{"GET", "/api/app/schedules/x"}, {"PATCH", "/api/app/schedules/x"}, {"DELETE", "/api/app/schedules/x"},
	{"POST", "/api/app/schedules/x/enable"}, {"POST", "/api/app/schedules/x/disable"},
	{"GET", "/api/app/system/health"}, {"GET", "/api/app/system/operator"}, {"POST", "/api/app/system/maintenance"}, {"GET", "/api/app/audit"},
	{"POST", "/api/app/commands/launch_playbook"},
}

func TestAppAuth(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	d.seed()
	for _, rt := range appRoutes {
		for _, tc := range []struct {
			name, token, query string
		}{{"no token", "", ""}, {"wrong token", "not-the-token", ""}, {"token in URL", testToken, "token=" + testToken}} {
			path := rt[1]
			if tc.query != "" {
				sep := "?"
				if strings.Contains(path, "?") {
					sep = "&"
				}
				path += sep + tc.query
			}
			status, out := d.callToken(rt[0], path, `{}`, tc.token)
			if status != http.StatusUnauthorized || errCode(out) != "auth_required" {
				t.Errorf("%s %s with %s = %d %v, want 401 auth_required", rt[0], rt[1], tc.name, status, out)
			}
		}
	}
	// Nothing changed by the refused requests.
	page := d.must("GET", "/api/app/audit?limit=200", "", 200)
	if n := len(page["events"].([]any)); n != 5 {
		t.Fatalf("%d audit rows after refused requests, want the 5 of seeding", n)
	}
}

func TestAppStatusCodes(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	pbID, runID := d.seed()
	stale := `{"expectedVersion":1,"description":"x"}`
	d.must("PATCH", "/api/app/playbooks/notes", stale, 200) // notes is now at version 2
	long := `{"name":"big","prompt":"` + strings.Repeat("x", 300<<10) + `"}`
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/api/app/playbooks/audit-repo", "", 200, ""},
		{"GET", "/api/app/playbooks/" + pbID, "", 200, ""},
		{"GET", "/api/app/playbooks/nope", "", 404, "not_found"},
		{"POST", "/api/app/playbooks", `{"name":"audit-repo","prompt":"again"}`, 409, "conflict"},
		{"POST", "/api/app/playbooks", `{"name":"x","prompt":"p","extra":true}`, 400, "validation"},
		{"POST", "/api/app/playbooks", `{"name":"Bad Name","prompt":"p"}`, 400, "validation"},
		{"POST", "/api/app/playbooks", `not json`, 400, "validation"},
		{"POST", "/api/app/playbooks", long, 400, "validation"},
		{"PATCH", "/api/app/playbooks/notes", stale, 409, "conflict"},
		{"PATCH", "/api/app/playbooks/notes", `{"playbook":"audit-repo","expectedVersion":2,"prompt":"p"}`, 400, "validation"},
		{"PATCH", "/api/app/playbooks/nope", `{"expectedVersion":1,"prompt":"p"}`, 404, "not_found"},
		{"DELETE", "/api/app/playbooks/audit-repo", "", 409, "conflict"}, // used by a schedule
		{"DELETE", "/api/app/playbooks/notes?expectedVersion=1", "", 409, "conflict"},
		{"DELETE", "/api/app/playbooks/notes?expectedVersion=zero", "", 400, "validation"},
		{"POST", "/api/app/playbooks/audit-repo/launch", `{}`, 400, "validation"}, // repo is required
		{"POST", "/api/app/playbooks/audit-repo/launch", `{"args":{"repo":"x","branch":"y"}}`, 400, "validation"},
		{"POST", "/api/app/runs", `{"playbook":"nope"}`, 404, "not_found"},
		{"POST", "/api/app/runs", `{"playbook":"notes","input":"v1.2"}`, 202, ""},
		{"GET", "/api/app/runs/" + runID, "", 200, ""},
		{"GET", "/api/app/runs/not-a-run", "", 404, "not_found"},
		{"GET", "/api/app/runs?status=exploded", "", 400, "validation"},
		{"GET", "/api/app/runs?since=yesterday", "", 400, "validation"},
		{"GET", "/api/app/runs?limit=500", "", 400, "validation"},
		{"GET", "/api/app/runs?cursor=garbage", "", 400, "validation"},
		{"GET", "/api/app/runs/stats?window=7d", "", 200, ""},
		{"GET", "/api/app/runs/stats?window=1y", "", 400, "validation"},
		{"POST", "/api/app/runs/" + runID + "/retry", "", 409, "conflict"}, // queued, not failed
		{"POST", "/api/app/runs/" + runID + "/cancel", `{"reason":"x"}`, 400, "validation"},
		{"POST", "/api/app/runs/" + runID + "/cancel", "", 200, ""},
		{"POST", "/api/app/runs/" + runID + "/cancel", "", 409, "conflict"}, // already ended
		{"POST", "/api/app/runs/" + runID + "/retry", "", 202, ""},
		{"GET", "/api/app/schedules/nightly", "", 200, ""},
		{"GET", "/api/app/schedules?enabled=maybe", "", 400, "validation"},
		{"POST", "/api/app/schedules", `{"name":"bad","cron":"every day","playbook":"notes"}`, 400, "validation"},
		{"GET", "/api/app/schedules/preview?cron=0+2+*+*+*&count=3", "", 200, ""},
		{"GET", "/api/app/schedules/preview?cron=0+2+*", "", 400, "validation"},
		{"POST", "/api/app/schedules/nightly/disable", "", 200, ""},
		{"DELETE", "/api/app/schedules/nightly?expectedVersion=1", "", 409, "conflict"},
		{"PATCH", "/api/app/schedules/nightly", `{"expectedVersion":2,"cron":"0 3 * * *"}`, 200, ""},
		{"POST", "/api/app/schedules/nightly/enable", `{"expectedVersion":3}`, 200, ""},
		{"DELETE", "/api/app/schedules/nightly?expectedVersion=4", "", 200, ""},
		{"GET", "/api/app/schedules/nightly", "", 404, "not_found"},
		{"PATCH", "/api/app/workflows/release", `{"expectedVersion":1,"description":"ship it"}`, 200, ""},
		{"GET", "/api/app/workflows/release", "", 200, ""},
		{"POST", "/api/app/workflows", `{"name":"w2","steps":[{"playbook":"nope"}]}`, 404, "not_found"},
		{"GET", "/api/app/system/health", "", 200, ""},
		{"POST", "/api/app/system/maintenance", `{"action":"integrity_check"}`, 200, ""},
		{"POST", "/api/app/system/maintenance", `{"action":"format_disk"}`, 400, "validation"},
		{"POST", "/api/app/system/maintenance", `{"action":"purge_frames","conversationId":"` + pbID + `","beforeSequence":1}`, 404, "not_found"},
		{"POST", "/api/app/commands/launch_playbook", `{"playbook":"audit-repo","args":{"repo":"y"}}`, 200, ""},
		{"POST", "/api/app/commands/drop_tables", `{}`, 400, "validation"},
		{"GET", "/api/app/nothing", "", 404, "not_found"},
	} {
		status, out := d.call(tc.method, tc.path, tc.body)
		if status != tc.status || errCode(out) != tc.code {
			t.Errorf("%s %s = %d %v, want %d %s", tc.method, tc.path, status, out, tc.status, tc.code)
		}
	}
	// A version conflict says which versions.
	_, out := d.call("PATCH", "/api/app/playbooks/notes", stale)
	details := out["error"].(map[string]any)["details"].(map[string]any)
	if details["expectedVersion"] != 1.0 || details["actualVersion"] != 2.0 {
		t.Fatalf("conflict details = %v", details)
	}
	// The cron preview is the next run times.
	prev := d.must("GET", "/api/app/schedules/preview?cron=0+2+*+*+*&count=3", "", 200)
	if next := prev["next"].([]any); len(next) != 3 || next[0] != protocol.Timestamp(storetest.Epoch.Add(14*time.Hour)) {
		t.Fatalf("preview = %v", prev)
	}
	// Health names the database file and no path.
	health := d.must("GET", "/api/app/system/health", "", 200)
	if health["status"] != "ok" || health["database"].(map[string]any)["file"] != "studio.db" {
		t.Fatalf("health = %v", health)
	}
	// Cockpit changes are in the audit trail, as the principal's (owner).
	audit := d.must("GET", "/api/app/audit?action=studio.app.command&limit=200", "", 200)
	evs := audit["events"].([]any)
	if len(evs) < 10 {
		t.Fatalf("%d audit rows", len(evs))
	}
	for _, e := range evs {
		if e.(map[string]any)["actor"] != httpapi.OwnerName {
			t.Fatalf("audit row = %v", e)
		}
	}
}

// TestAppPaging: 25 items paged by 7 — every item once, in order.
func TestAppPaging(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	var names []string
	for i := range 25 {
		name := fmt.Sprintf("pb-%02d", i)
		names = append(names, name)
		d.must("POST", "/api/app/playbooks", `{"name":"`+name+`","prompt":"p"}`, 201)
		d.must("POST", "/api/app/runs", `{"playbook":"`+name+`"}`, 202) // all runs in the same instant
	}
	collect := func(path, list, key string, wantPages int) []string {
		t.Helper()
		var got []string
		cursor, pages := "", 0
		for {
			q := path + "?limit=7"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			out := d.must("GET", q, "", 200)
			pages++
			for _, item := range out[list].([]any) {
				got = append(got, item.(map[string]any)[key].(string))
			}
			next, _ := out["nextCursor"].(string)
			if next == "" {
				break
			}
			cursor = next
			if pages > 10 {
				t.Fatalf("%s: paging does not end", path)
			}
		}
		if pages != wantPages {
			t.Fatalf("%s: %d pages, want %d", path, pages, wantPages)
		}
		return got
	}
	if got := collect("/api/app/playbooks", "playbooks", "name", 4); strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("playbook pages = %v", got)
	}
	runs := collect("/api/app/runs", "runs", "id", 4)
	seen := map[string]bool{}
	for _, id := range runs {
		if seen[id] {
			t.Fatalf("run %s repeated", id)
		}
		seen[id] = true
	}
	if len(seen) != 25 {
		t.Fatalf("%d distinct runs, want 25", len(seen))
	}
	// 50 commands, 50 audit rows: 8 pages.
	if audit := collect("/api/app/audit", "events", "action", 8); len(audit) != 50 {
		t.Fatalf("audit pages hold %d rows", len(audit))
	}
}

// TestPurgeFramesReplayGap: after purge_frames, a stream from a cursor
// older than the retained frames answers 409 replay_gap with the earliest
// cursor that works; from a retained cursor it replays normally.
func TestPurgeFramesReplayGap(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Two complete turns.
	var last int64
	for range 2 {
		acc, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "what failed today?",
			Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
		if err != nil {
			t.Fatal(err)
		}
		err = d.client.Stream(ctx, conv.ID, acc.AcceptedSequence-1, func(f protocol.Frame) error {
			last = f.Sequence
			if f.Type == protocol.FrameDone {
				return apiclient.ErrStopStream
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	page, err := d.client.GetConversation(ctx, conv.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	// The second turn starts after the first one's done frame.
	var secondStart int64
	for _, f := range page.Frames {
		if f.Type == protocol.FrameDone {
			secondStart = f.Sequence + 1
			break
		}
	}
	if secondStart < 3 || last != page.LatestSequence {
		t.Fatalf("frames = %+v", page.Frames)
	}

	res, err := d.client.Maintenance(ctx, studio.RunMaintenanceCommand{Action: studio.MaintenancePurgeFrames, ConversationID: conv.ID, BeforeSequence: secondStart})
	if err != nil {
		t.Fatal(err)
	}
	earliest := secondStart - 1
	if !res.OK || *res.EarliestAfterSequence != earliest || *res.FramesPurged != earliest {
		t.Fatalf("purge = %+v", res)
	}

	for _, after := range []int64{0, earliest - 1} {
		err := d.client.Stream(ctx, conv.ID, after, func(protocol.Frame) error { return errors.New("a frame from a purged cursor") })
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.ReplayGap {
			t.Fatalf("stream after %d: err = %v, want replay_gap", after, err)
		}
		if got, _ := pe.Details["earliestAfterSequence"].(float64); int64(got) != earliest {
			t.Fatalf("stream after %d: details = %v, want earliestAfterSequence %d", after, pe.Details, earliest)
		}
		status, out := d.call("GET", fmt.Sprintf("/api/operator/conversations/%s/stream?after_sequence=%d", conv.ID, after), "")
		if status != http.StatusConflict || errCode(out) != "replay_gap" {
			t.Fatalf("raw stream after %d = %d %v", after, status, out)
		}
	}
	// From the earliest retained cursor: the second turn, in order, to its done.
	var got []int64
	err = d.client.Stream(ctx, conv.ID, earliest, func(f protocol.Frame) error {
		got = append(got, f.Sequence)
		if f.Sequence == last {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0] != secondStart || got[len(got)-1] != last || int64(len(got)) != last-earliest {
		t.Fatalf("replay from %d = %v, want %d..%d", earliest, got, secondStart, last)
	}
	// The purge is in the audit trail.
	audit := d.must("GET", "/api/app/audit?targetId="+conv.ID, "", 200)
	if evs := audit["events"].([]any); len(evs) != 1 {
		t.Fatalf("audit = %v", audit)
	}
}

// TestAppClientDoctor: the Go client the CLI uses reads the health report.
func TestAppClientDoctor(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	r, err := d.client.Doctor(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != studio.StatusOK || r.Database.File != "studio.db" || r.Model.Provider != "script" {
		t.Fatalf("doctor = %+v", r)
	}
	res, err := d.client.Execute(t.Context(), studio.CreatePlaybookCommand{Name: "p", Prompt: "p"})
	if err != nil || res.Playbook == nil || res.Playbook.Name != "p" {
		t.Fatalf("execute = %+v, %v", res, err)
	}
}

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
	out = d.must("GET", "/api/app/runs?counts=true&since="+since, "", 200)
	if count(out) != 2 || out["total"].(float64) != 2 {
		t.Fatalf("since: %v", out)
	}
	// The two runs since then are the last two launched.
	for _, r := range out["runs"].([]any) {
		if id := r.(map[string]any)["id"]; id != ids[1] && id != ids[2] {
			t.Fatalf("since: run %v is not one of the last two launched %v", id, ids[1:])
		}
	}
	if status, out := d.call("GET", "/api/app/runs?q="+url.QueryEscape(string(make([]byte, 300))), ""); status != 400 {
		t.Fatalf("a 300-byte q: %d %v", status, out)
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
