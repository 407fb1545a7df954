package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// lockedBuffer is a log destination safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proxyCall sends GET path with headers (and a bearer token when set) and
// decodes a principal or an error.
func proxyCall(t *testing.T, base, token string, headers map[string]string) (int, protocol.Principal, *protocol.Error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/auth/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var eb protocol.ErrorBody
	if resp.StatusCode != http.StatusOK {
		if err := protocol.Unmarshal(buf.Bytes(), &eb); err != nil {
			t.Fatalf("%d %s", resp.StatusCode, buf.String())
		}
		return resp.StatusCode, protocol.Principal{}, eb.Error
	}
	var p protocol.Whoami
	if err := protocol.Unmarshal(buf.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, p.Principal, nil
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// TestAuthProxyTrustedPeerSignsIn: from the proxy's address the header
// signs the user in, creating the principal on first use with the
// default role (audited, the proxy as actor), once; bearer tokens keep
// working beside it; an existing principal keeps its role (the default
// neither raises nor lowers it); a disabled one stays refused.
func TestAuthProxyTrustedPeerSignsIn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback, DefaultRole: protocol.RoleOperator}})
	ctx := h.ctx()
	for range 2 {
		status, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "Alice@Example.com"})
		if status != http.StatusOK || who.Name != "alice@example.com" || who.Role != protocol.RoleOperator {
			t.Fatalf("proxy sign-in: %d %+v %+v", status, who, perr)
		}
	}
	rows, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: httpapi.ActionPrincipalCreated})
	if err != nil || len(rows) != 1 || rows[0].Actor != httpapi.AuthProxyActor {
		t.Fatalf("created rows %+v, %v; want one by %s", rows, err, httpapi.AuthProxyActor)
	}
	// A principal the proxy creates acts like any: it owns what it creates.
	status, perr := call(t, h.srv.URL, "", "GET", "/api/operator/conversations", "")
	if status != http.StatusUnauthorized || perr == nil || perr.Code != protocol.AuthRequired {
		t.Fatalf("no header, no token: %d %+v", status, perr)
	}
	// Bearer tokens beside it.
	if who, err := h.client.Whoami(ctx); err != nil || who.Name != httpapi.OwnerName {
		t.Fatalf("the owner's token: %+v, %v", who, err)
	}
	// An existing viewer stays a viewer: the default (operator) does not raise it.
	h.principalToken("vera", protocol.RoleViewer)
	if _, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "vera"}); who.Role != protocol.RoleViewer {
		t.Fatalf("an existing viewer signs in as %+v %+v; want viewer", who, perr)
	}
	if _, err := h.client.DisablePrincipal(ctx, "vera"); err != nil {
		t.Fatal(err)
	}
	if status, _, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "vera"}); status != http.StatusUnauthorized || perr.Code != protocol.AuthRequired {
		t.Fatalf("a disabled principal: %d %+v", status, perr)
	}
	// A name no principal may have, and a principal's id, sign no one in.
	if status, _, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "studio_operator"}); status != http.StatusUnauthorized || perr.Code != protocol.AuthRequired {
		t.Fatalf("a reserved name: %d %+v", status, perr)
	}
	owner, err := h.store.GetPrincipal(ctx, httpapi.OwnerName)
	if err != nil {
		t.Fatal(err)
	}
	if _, who, _ := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": owner.ID}); who.Role == protocol.RoleAdmin {
		t.Fatalf("the owner's id as a user name signed in as %+v", who)
	}
}

// TestAuthProxyUntrustedPeerRefused: the header from an address that is
// not the proxy's is 401 auth_required and logged, even beside a valid
// bearer token and whatever X-Forwarded-For says; no principal is made.
func TestAuthProxyUntrustedPeerRefused(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	h := newHarness(t, harnessOpts{principals: true, logger: slog.New(slog.NewTextHandler(logs, nil)),
		authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			DefaultRole: protocol.RoleViewer, GroupsHeader: "X-Forwarded-Groups", GroupRoles: map[string]protocol.Role{"ops": protocol.RoleAdmin}}})
	for _, headers := range []map[string]string{
		{"X-Forwarded-User": "mallory"},
		{"X-Forwarded-User": "mallory", "X-Forwarded-For": "10.1.2.3"},
		{"X-Forwarded-Groups": "ops"},
	} {
		for _, token := range []string{"", testToken} {
			status, who, perr := proxyCall(t, h.srv.URL, token, headers)
			if status != http.StatusUnauthorized || perr == nil || perr.Code != protocol.AuthRequired || perr.Details["reason"] != "auth_proxy" {
				t.Fatalf("%v (token %t) from loopback: %d %+v %+v; want 401 auth_required", headers, token != "", status, who, perr)
			}
		}
	}
	// Beside a stream ticket too.
	conv := h.conversation()
	tk, err := h.client.CreateTicket(h.ctx(), protocol.StreamTicketRequest{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, h.srv.URL+"/api/operator/conversations/"+conv.ID+"/stream?ticket="+tk.Ticket, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-User", "mallory")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a stream ticket with the header from loopback: %d, want 401", resp.StatusCode)
	}
	if _, err := h.store.GetPrincipal(h.ctx(), "mallory"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("mallory: %v, want not_found", err)
	}
	if !strings.Contains(logs.String(), "auth proxy sign-in refused") || !strings.Contains(logs.String(), "127.0.0.1") {
		t.Fatalf("the refusal is not logged with the peer:\n%s", logs.String())
	}
	// Without the header, the token works as ever.
	if who, err := h.client.Whoami(h.ctx()); err != nil || who.Name != httpapi.OwnerName {
		t.Fatalf("the owner's token: %+v, %v", who, err)
	}
}

// TestAuthProxyGroupsSetTheRole: with a groups header, each sign-in sets
// the role from the groups: the highest mapped one, else the default;
// each change audited with the proxy as actor.
func TestAuthProxyGroupsSetTheRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback,
		DefaultRole: protocol.RoleViewer, GroupsHeader: "X-Forwarded-Groups",
		GroupRoles: map[string]protocol.Role{"studio-admins": protocol.RoleAdmin, "studio-ops": protocol.RoleOperator}}})
	for _, step := range []struct {
		groups string
		want   protocol.Role
	}{
		{"studio-ops, other", protocol.RoleOperator},
		{"other,studio-admins,studio-ops", protocol.RoleAdmin},
		{"", protocol.RoleViewer},
		{"studio-ops", protocol.RoleOperator},
	} {
		status, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "carol", "X-Forwarded-Groups": step.groups})
		if status != http.StatusOK || who.Role != step.want {
			t.Fatalf("groups %q: %d %+v %+v; want %s", step.groups, status, who, perr, step.want)
		}
	}
	rows, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: httpapi.ActionPrincipalRole})
	if err != nil || len(rows) != 3 {
		t.Fatalf("role rows %+v, %v; want 3", rows, err)
	}
	for _, r := range rows {
		if r.Actor != httpapi.AuthProxyActor {
			t.Fatalf("role row by %q", r.Actor)
		}
	}
}

func TestAuthProxyConfiguration(t *testing.T) {
	t.Parallel()
	if _, err := httpapi.ParseTrusted([]string{"10.0.0.0/8", "192.168.1.7", "::1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := httpapi.ParseTrusted([]string{"nonsense"}); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
	if _, err := httpapi.ParseGroupRoles([]string{"ops=root"}); err == nil {
		t.Fatal("an unknown role was accepted")
	}
	if _, err := httpapi.ParseGroupRoles([]string{"ops"}); err == nil {
		t.Fatal("a pair without = was accepted")
	}
	for _, bad := range []httpapi.AuthProxy{
		{Header: "X-Forwarded-User", DefaultRole: protocol.RoleViewer}, // no trusted addresses
		{Header: "X-Forwarded-User", Trusted: loopback, DefaultRole: "root"},
		{Header: "X-Forwarded-User", Trusted: loopback, DefaultRole: protocol.RoleViewer, GroupRoles: map[string]protocol.Role{"a": protocol.RoleAdmin}},
	} {
		if err := bad.Validate(); err == nil {
			t.Fatalf("%+v was accepted", bad)
		}
	}
}
