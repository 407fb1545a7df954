package httpapi_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the route table in docs/protocol.md")

// openRoutes answer without a token.
var openRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /api/openapi.json": true,
	"GET " + httpapi.ResourceMetadataPath: true, "GET " + httpapi.ResourceMetadataPath + "/mcp": true,
	"GET /.well-known/oauth-authorization-server": true, "GET /.well-known/openid-configuration": true,
	"/mcp": true} // every method but POST: 405

// TestRouteActionsCoverTheRouter fails for a route the server registers
// without a policy action, and for an entry no route has.
func TestRouteActionsCoverTheRouter(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	srv := httpapi.New(withEngine(httpapi.Config{Token: testToken, App: d.svc}, d.coord, d.convs))
	defer srv.Close()
	registered := map[string]bool{}
	for _, pattern := range httpapi.Patterns(srv) {
		registered[pattern] = true
		if openRoutes[pattern] {
			continue
		}
		if _, ok := httpapi.RouteActions[pattern]; !ok {
			t.Errorf("route %q has no policy action in httpapi.RouteActions", pattern)
		}
	}
	for pattern := range httpapi.RouteActions {
		if !registered[pattern] && pattern != "/" { // "/": the degraded API's one route
			t.Errorf("httpapi.RouteActions names %q, which no route serves", pattern)
		}
	}
}

// TestRouteTableInProtocolDoc: docs/protocol.md prints the table as the
// code has it (go test ./internal/httpapi -run RouteTable -update-docs).
func TestRouteTableInProtocolDoc(t *testing.T) {
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
	want := doc[:i+len(begin)] + httpapi.RouteTable() + doc[j:]
	if want == doc {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the route table in %s is stale: go test ./internal/httpapi -run RouteTable -update-docs", path)
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

// principal is a client of a new principal with a role.
func (h *harness) principal(name string, role protocol.Role) *apiclient.Client {
	h.t.Helper()
	return h.as(h.principalToken(name, role))
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
