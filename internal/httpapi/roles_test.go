package httpapi_test

import (
	"flag"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the roles table in docs/protocol.md")

// openRoutes answer without a token.
var openRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /api/openapi.json": true,
	"GET " + httpapi.ResourceMetadataPath: true, "GET " + httpapi.ResourceMetadataPath + "/mcp": true,
	"GET /.well-known/oauth-authorization-server": true, "GET /.well-known/openid-configuration": true,
	"/mcp": true} // every method but POST: 405

// TestRouteRolesCoverTheRouter fails for a route the server registers
// without an entry in the role table, and for an entry no route has.
func TestRouteRolesCoverTheRouter(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	srv := httpapi.New(httpapi.Config{Coordinator: d.coord, Conversations: d.convs, Token: testToken, App: d.svc})
	defer srv.Close()
	registered := map[string]bool{}
	for _, pattern := range httpapi.Patterns(srv) {
		registered[pattern] = true
		if openRoutes[pattern] {
			continue
		}
		if _, ok := httpapi.RouteRoles[pattern]; !ok {
			t.Errorf("route %q has no least role in httpapi.RouteRoles", pattern)
		}
	}
	for pattern := range httpapi.RouteRoles {
		if !registered[pattern] && pattern != "/" { // "/": the degraded API's one route
			t.Errorf("httpapi.RouteRoles names %q, which no route serves", pattern)
		}
	}
}

// TestRolesTableInProtocolDoc: docs/protocol.md prints the table as the
// code has it (go test ./internal/httpapi -run RolesTable -update-docs).
func TestRolesTableInProtocolDoc(t *testing.T) {
	const path = "../../docs/protocol.md"
	const begin, end = "<!-- roles:begin -->\n", "<!-- roles:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", path, begin, end)
	}
	want := doc[:i+len(begin)] + httpapi.RoleTable() + doc[j:]
	if want == doc {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the roles table in %s is stale: go test ./internal/httpapi -run RolesTable -update-docs", path)
}

// principalToken creates a principal with a role and one token.
func (h *harness) principalToken(name string, role protocol.Role) string {
	h.t.Helper()
	now := h.clock.Now()
	p, err := h.store.CreatePrincipal(h.ctx(), store.CreatePrincipalParams{ID: uuid.NewString(), Name: name, Role: role, Now: now})
	if err != nil {
		h.t.Fatal(err)
	}
	token := httpapi.NewToken()
	if _, err := h.store.CreateToken(h.ctx(), store.CreateTokenParams{ID: uuid.NewString(), PrincipalID: p.ID,
		Hash: httpapi.HashToken(token), Prefix: httpapi.TokenDisplayPrefix(token), Now: now}); err != nil {
		h.t.Fatal(err)
	}
	return token
}

// as is a client of the harness's daemon with another token.
func (h *harness) as(token string) *apiclient.Client {
	return apiclient.New(h.srv.URL, token, h.srv.Client())
}

// rawCall sends one request and returns the status and the error body's
// code and details (when it has one).
func rawCall(t *testing.T, base, token, method, path string) (int, *protocol.Error) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPatch {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb protocol.ErrorBody
	if protocol.Unmarshal(b, &eb) == nil && eb.Error != nil {
		return resp.StatusCode, eb.Error
	}
	return resp.StatusCode, nil
}

// TestEveryRouteEveryRole drives every route of a real daemon over HTTP
// with a token of every role: a role the table allows is never refused
// for its role, a lesser one is 403 denied naming the role needed, and no
// token is 401.
func TestEveryRouteEveryRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, serveApp: true, principals: true})
	tokens := map[protocol.Role]string{}
	for _, role := range protocol.Roles {
		tokens[role] = h.principalToken("p-"+string(role), role)
	}
	calls := 0
	for _, pattern := range httpapi.Patterns(h.api) {
		if openRoutes[pattern] {
			continue
		}
		need := httpapi.RouteRoles[pattern]
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = http.MethodGet, pattern+"no-such-endpoint"
		}
		path = fill(path, -1, "")
		if pattern == "GET /api/app/events" {
			// A stream: a cursor it refuses answers at once, after the role check.
			path += "?after=-1"
		}
		if status, perr := rawCall(t, h.srv.URL, "", method, path); status != http.StatusUnauthorized || perr == nil || perr.Code != protocol.AuthRequired {
			t.Errorf("%s without a token: %d %+v, want 401 auth_required", pattern, status, perr)
		}
		for _, role := range protocol.Roles {
			status, perr := rawCall(t, h.srv.URL, tokens[role], method, path)
			calls++
			if role.Allows(need) {
				if status == http.StatusForbidden && perr != nil && perr.Details["reason"] == "role" {
					t.Errorf("%s as %s (needs %s): refused for the role: %+v", pattern, role, need, perr)
				}
				continue
			}
			if status != http.StatusForbidden || perr == nil || perr.Code != protocol.Denied ||
				perr.Details["reason"] != "role" || perr.Details["needed"] != string(need) {
				t.Errorf("%s as %s (needs %s): %d %+v, want 403 denied naming %s", pattern, role, need, status, perr, need)
			}
		}
	}
	if calls < 5*60 {
		t.Fatalf("only %d calls: the router has fewer routes than expected", calls)
	}
}

// TestRevokedExpiredUnknownTokens: a revoked token, an expired one and one
// never issued are 401 auth_required from the next request on.
func TestRevokedExpiredUnknownTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true})
	admin := h.as(testToken)
	ctx := h.ctx()
	if _, err := admin.CreatePrincipal(ctx, "alice", protocol.RoleViewer); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, "alice", "1d")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Token, "stu_") || len(tok.Token) < 4+43 || !strings.HasPrefix(tok.Token, tok.Prefix) {
		t.Fatalf("token %q, prefix %q", tok.Token, tok.Prefix)
	}
	alice := h.as(tok.Token)
	who, err := alice.Whoami(ctx)
	if err != nil || who.Name != "alice" || who.Role != protocol.RoleViewer {
		t.Fatalf("whoami = %+v, %v", who, err)
	}
	// Expired: the daemon's clock moves past the day.
	other, err := admin.CreateToken(ctx, "alice", "1h")
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * 3600e9)
	if _, err := h.as(other.Token).Whoami(ctx); !protocol.IsCode(err, protocol.AuthRequired) {
		t.Fatalf("expired token: %v, want auth_required", err)
	}
	if _, err := alice.Whoami(ctx); err != nil {
		t.Fatalf("the unexpired token: %v", err)
	}
	if _, err := admin.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Whoami(ctx); !protocol.IsCode(err, protocol.AuthRequired) {
		t.Fatalf("revoked token: %v, want auth_required", err)
	}
	if _, err := h.as(httpapi.NewToken()).Whoami(ctx); !protocol.IsCode(err, protocol.AuthRequired) {
		t.Fatalf("unknown token: %v, want auth_required", err)
	}
	// The revocation is audited with the admin (owner) as actor.
	rows, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: httpapi.ActionTokenRevoked, TargetID: tok.ID})
	if err != nil || len(rows) != 1 || rows[0].Actor != httpapi.OwnerName {
		t.Fatalf("revocation audit rows %+v, %v", rows, err)
	}
}

// TestLastAdminStays: the last enabled admin can be neither demoted nor
// disabled.
func TestLastAdminStays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true})
	admin, ctx := h.as(testToken), h.ctx()
	if _, err := admin.SetPrincipalRole(ctx, httpapi.OwnerName, protocol.RoleViewer); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("demoting the last admin: %v, want conflict", err)
	}
	if _, err := admin.DisablePrincipal(ctx, httpapi.OwnerName); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("disabling the last admin: %v, want conflict", err)
	}
	if _, err := admin.CreatePrincipal(ctx, "Bad Name", protocol.RoleViewer); !protocol.IsCode(err, protocol.Validation) {
		t.Fatalf("a bad name: %v, want validation", err)
	}
	if _, err := admin.CreatePrincipal(ctx, "studio_operator", protocol.RoleViewer); !protocol.IsCode(err, protocol.Validation) {
		t.Fatalf("a reserved name: %v, want validation", err)
	}
}
