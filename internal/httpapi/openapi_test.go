package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/openapi"
	"github.com/studio/operator/internal/openapi/openapitest"
	"github.com/studio/operator/internal/protocol"
)

// TestOpenAPICoversTheRouter fails when a route is missing from the OpenAPI
// document or documented but absent: the patterns a real server registers
// and the document's operations must be the same set, and each documented
// operation must be the route the server matches for its path.
func TestOpenAPICoversTheRouter(t *testing.T) {
	t.Parallel()
	documented := map[string]bool{}
	for _, op := range openapi.Operations() {
		documented[op.Method+" "+op.Path] = true
	}
	d := newAppDaemon(t)
	srv := httpapi.New(withEngine(httpapi.Config{Token: testToken, App: d.svc}, d.coord, d.convs))
	defer srv.Close()
	registered := map[string]bool{}
	for _, r := range httpapi.Patterns(srv) {
		if !strings.Contains(r, " ") {
			continue // a method-less catch-all (the /api/ not_found answer)
		}
		registered[r] = true
		if !documented[r] {
			t.Errorf("route %q is registered but not in the OpenAPI document (internal/openapi/operations.go)", r)
		}
	}
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for route := range documented {
		if !registered[route] {
			t.Errorf("operation %q is in the OpenAPI document but no route serves it", route)
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		req := httptest.NewRequest(method, param.ReplaceAllString(path, "x1"), nil)
		if got := srv.Route(req); got != route {
			t.Errorf("%s %s is served by %q, documented as %q", method, req.URL.Path, got, route)
		}
	}
}

// TestOpenAPIResponses drives every documented operation of a real daemon
// and validates each answer against the document (kin-openapi, JSON Schema
// 2020-12): successes and typed errors alike.
func TestOpenAPIResponses(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	v := openapitest.New(t)
	hc := &http.Client{Transport: v.Transport(d.srv.Client().Transport)}
	call := func(method, path, body string, want int) string {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, d.srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	field := func(body, name string) string {
		t.Helper()
		m := regexp.MustCompile(`"` + name + `":"([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in %s", name, body)
		}
		return m[1]
	}
	call("GET", "/healthz", "", 200)
	call("GET", "/readyz", "", 200)
	call("GET", "/api/openapi.json", "", 200)
	call("GET", "/metrics", "", 200)
	call("GET", "/.well-known/oauth-protected-resource", "", 404)
	call("GET", "/.well-known/oauth-protected-resource/mcp", "", 404)
	call("GET", "/.well-known/oauth-authorization-server", "", 404)
	call("GET", "/.well-known/openid-configuration", "", 404)
	call("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 404) // this daemon serves no MCP
	call("POST", "/api/agui", `{"threadId":"t","runId":"r","messages":[]}`, 404) // nor AG-UI

	conv := field(call("POST", "/api/operator/conversations", `{"title":"tour"}`, 201), "id")
	cp := "/api/operator/conversations/" + conv
	call("GET", "/api/operator/conversations", "", 200)
	call("PATCH", cp, `{"title":"tour 2"}`, 200)
	acc := call("POST", cp+"/turns", `{"instruction":"hello","context":{"space":"mission","route":"/"},"expectedLastSequence":0}`, 202)
	rid := field(acc, "requestId")
	err := d.client.Stream(t.Context(), conv, 0, func(f protocol.Frame) error {
		if f.Type == protocol.FrameDone {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	call("GET", cp+"?after_sequence=0", "", 200) // the frames, each a Frame of the union
	call("POST", cp+"/requests/"+rid+"/cancel", "", 200)
	call("POST", "/api/operator/stream-tickets", `{"conversationId":"`+conv+`","afterSequence":0}`, 201)
	call("GET", cp+"/proposals", "", 200)
	call("GET", "/api/operator/proposals?status=pending", "", 200)
	missing := "00000000-0000-4000-8000-000000000000"
	call("GET", "/api/operator/proposals/"+missing, "", 404)
	call("GET", cp+"/proposals/"+missing, "", 404)
	call("POST", cp+"/proposals/"+missing+"/confirm", `{"expectedCommandHash":"x","expectedTargetVersion":3}`, 404)
	call("POST", cp+"/proposals/"+missing+"/deny", "", 404)
	call("POST", cp+"/effects/"+missing+"/ack", `{"status":"applied","clientRoute":"/"}`, 404)
	call("GET", cp+"/effects/"+missing, "", 404)
	call("GET", "/api/app/events?after=-1", "", 400) // the stream itself: app_events_test.go
	call("GET", "/api/operator/routes", "", 200)
	call("GET", "/api/operator/tools", "", 200)

	pb := call("POST", "/api/app/playbooks", `{"name":"tour","prompt":"Audit {{input}}","args":[{"name":"depth","default":"1"}]}`, 201)
	pbID := field(pb, "id")
	call("GET", "/api/app/playbooks?q=tour", "", 200)
	call("GET", "/api/app/playbooks/tour", "", 200)
	call("PATCH", "/api/app/playbooks/tour", `{"expectedVersion":1,"description":"the tour"}`, 200)
	run := field(call("POST", "/api/app/playbooks/tour/launch", `{"input":"acme/api"}`, 202), "id")
	call("POST", "/api/app/runs", `{"playbook":"tour"}`, 202)
	call("GET", "/api/app/runs?status=queued", "", 200)
	call("GET", "/api/app/runs/stats?window=24h", "", 200)
	call("GET", "/api/app/runs/"+run, "", 200)
	call("POST", "/api/app/runs/"+run+"/cancel", "", 200)
	call("POST", "/api/app/runs/"+run+"/retry", "", 202)
	call("POST", "/api/app/workflows", `{"name":"flow","steps":[{"playbook":"tour"}]}`, 201)
	call("GET", "/api/app/workflows", "", 200)
	call("GET", "/api/app/workflows/flow", "", 200)
	call("PATCH", "/api/app/workflows/flow", `{"expectedVersion":1,"description":"d"}`, 200)
	call("POST", "/api/app/workflows/flow/launch", `{"expectedVersion":2}`, 202)
	call("GET", "/api/app/runs?workflow=flow&q=tour&counts=true", "", 200)
	call("GET", "/api/app/runs/activity?edges=0,1764460800,1764547200", "", 200)
	call("POST", "/api/app/workflows", `{"name":"doomed","steps":[{"playbook":"tour"}]}`, 201)
	call("DELETE", "/api/app/workflows/doomed?expectedVersion=1", "", 200)
	call("GET", "/api/app/system/operator?window=24h", "", 200)
	call("POST", "/api/app/schedules", `{"name":"nightly","cron":"0 2 * * *","playbook":"tour","enabled":false}`, 201)
	call("GET", "/api/app/schedules", "", 200)
	call("GET", "/api/app/schedules/preview?cron=0+2+*+*+*&count=2", "", 200)
	call("GET", "/api/app/schedules/nightly", "", 200)
	call("PATCH", "/api/app/schedules/nightly", `{"expectedVersion":1,"input":"x"}`, 200)
	call("POST", "/api/app/schedules/nightly/enable", "", 200)
	call("POST", "/api/app/schedules/nightly/disable", `{"expectedVersion":3}`, 200)
	call("DELETE", "/api/app/schedules/nightly?expectedVersion=4", "", 200)
	call("GET", "/api/app/system/health", "", 200)
	call("GET", "/api/app/system/health?part=work", "", 200)
	call("GET", "/api/app/system/health?part=all", "", 400)
	call("POST", "/api/app/system/maintenance", `{"action":"integrity_check"}`, 200)
	call("GET", "/api/app/audit?actor=studio_cockpit&commandType=update_playbook&since=0", "", 200)
	call("GET", "/api/app/audit/actors", "", 200)
	call("POST", "/api/app/commands/set_schedule_enabled", `{"schedule":"missing","enabled":true}`, 404)
	call("POST", "/api/app/commands/update_playbook", `{"playbook":"tour","expectedVersion":2,"prompt":"Audit {{input}} again"}`, 200)
	call("DELETE", "/api/app/playbooks/"+pbID+"?expectedVersion=3", "", 409) // used by the workflow
	spare := field(call("POST", "/api/app/playbooks", `{"name":"spare","prompt":"p"}`, 201), "id")
	call("DELETE", "/api/app/playbooks/"+spare+"?expectedVersion=1", "", 200)
	// Conversation history: search, pin and model, fork, the live view, amend, restore.
	call("GET", "/api/operator/conversations?q=tour&status=active", "", 200)
	call("PATCH", cp, `{"pinned":true,"model":""}`, 200)
	call("GET", "/api/operator/models", "", 200)
	fork := call("POST", cp+"/fork", `{"title":"what if"}`, 201)
	if !strings.Contains(fork, `"copiedThrough":3`) {
		t.Fatalf("fork: %s", fork)
	}
	call("POST", cp+"/fork", `{"upToSequence":1}`, 400)
	call("POST", cp+"/view", `{"space":"history","route":"/history","observedAt":1}`, 202)
	call("POST", cp+"/proposals/"+missing+"/amend", `{"expectedCommandHash":"x","command":{}}`, 404)
	call("DELETE", cp, "", 200)
	call("GET", "/api/operator/conversations?status=deleted", "", 200)
	call("POST", cp+"/restore", "", 200)
	call("DELETE", cp, "", 200)

	// Principals and tokens (the owner is the admin).
	call("GET", "/api/auth/whoami", "", 200)
	call("POST", "/api/admin/principals", `{"name":"alice","role":"operator"}`, 201)
	call("GET", "/api/admin/principals", "", 200)
	call("PATCH", "/api/admin/principals/alice", `{"role":"approver"}`, 200)
	call("POST", "/api/admin/policy/explain", `{"principal":"alice","action":"run_command","command":{"type":"run_maintenance","body":{"action":"vacuum"}}}`, 200)
	call("POST", "/api/admin/policy/explain", `{"principal":"alice","action":"launch"}`, 400)
	tokenID := field(call("POST", "/api/admin/principals/alice/tokens", `{"expiresIn":"90d"}`, 201), "id")
	call("GET", "/api/admin/tokens?principal=alice", "", 200)
	call("DELETE", "/api/admin/tokens/"+tokenID, "", 200)
	call("PUT", "/api/admin/principals/alice/link", `{"proxyUser":"alice@corp"}`, 200)
	call("PUT", "/api/admin/principals/alice/link", `{"proxyUser":"\u212Airk"}`, 400)
	call("DELETE", "/api/admin/principals/alice/link", "", 200)
	call("DELETE", "/api/admin/principals/alice", "", 200)
	call("POST", "/api/admin/principals", `{"name":"alice","role":"viewer"}`, 409)
	// Webhooks.
	hookID := field(call("POST", "/api/admin/webhooks", `{"url":"https://example.com/hook","events":["turn.failed"],"format":"slack"}`, 201), "id")
	call("POST", "/api/admin/webhooks", `{"url":"ftp://example.com/hook","events":["turn.failed"]}`, 400)
	call("GET", "/api/admin/webhooks", "", 200)
	call("GET", "/api/admin/webhooks/"+hookID+"/deliveries", "", 200)
	call("GET", "/api/admin/webhooks/nope/deliveries", "", 404)
	call("DELETE", "/api/admin/webhooks/"+hookID, "", 200)

	// Typed errors answer with the error body of their status.
	call("GET", cp, "", 404)
	call("POST", "/api/operator/conversations", `{"title":1}`, 400)
	call("GET", "/api/app/runs?limit=0", "", 400)
	req, _ := http.NewRequest("GET", d.srv.URL+"/api/operator/conversations", nil)
	resp, err := hc.Do(req) // no token
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("without a token: %v %v", resp, err)
	}
	resp.Body.Close()

	seen := v.Seen()
	for _, op := range openapi.Operations() {
		if op.ID == "streamFrames" {
			continue // SSE: frames are checked by the strict client decoder
		}
		if !slices.Contains(seen, op.ID) {
			t.Errorf("operation %s (%s %s) was not exercised", op.ID, op.Method, op.Path)
		}
	}
}

// TestOpenAPIServedWithoutAuth: the document is public and is the one the
// repository keeps.
func TestOpenAPIServedWithoutAuth(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	resp, err := http.Get(d.srv.URL + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	kept, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != string(kept) {
		t.Fatalf("GET /api/openapi.json: %d, %d bytes; docs/openapi.json has %d", resp.StatusCode, len(body), len(kept))
	}
}
