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
		for _, line := range strings.Split(v, "\n") { // a header sent twice: two lines
			req.Header.Add(k, line)
		}
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
// signs the user in, creating a proxy principal on first use with the
// default role (audited, the proxy as actor), once; bearer tokens keep
// working beside it; a local principal linked to the user keeps its role
// (the default neither raises nor lowers it); a disabled one stays
// refused.
func TestAuthProxyTrustedPeerSignsIn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback, DefaultRole: protocol.RoleOperator}})
	ctx := h.ctx()
	for range 2 {
		status, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "Alice@Example.com"})
		if status != http.StatusOK || who.Name != "alice@example.com" || who.Role != protocol.RoleOperator || who.Origin != protocol.OriginProxy {
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
	// A linked viewer stays a viewer: the default (operator) does not raise it.
	h.principalToken("vera", protocol.RoleViewer)
	if _, err := h.client.LinkPrincipal(ctx, "vera", "vera"); err != nil {
		t.Fatal(err)
	}
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
	if status, _, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "studio_operator"}); status != http.StatusBadRequest || perr.Code != protocol.Validation {
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

// TestAuthProxyNeverSignsInAsALocalPrincipal: the proxy's user of a local
// principal's name (Owner is owner) is refused with 403 denied, whatever
// its groups say, and neither becomes nor demotes the bootstrap admin nor
// any local principal, until an admin links the two (audited); a link
// signs the user in as the local principal with the role the admin gave
// it, and an unlink ends that.
func TestAuthProxyNeverSignsInAsALocalPrincipal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback,
		DefaultRole: protocol.RoleViewer, GroupsHeader: "X-Forwarded-Groups",
		GroupRoles: map[string]protocol.Role{"studio-admins": protocol.RoleAdmin, "studio-ops": protocol.RoleOperator}}})
	ctx := h.ctx()
	h.principalToken("alice", protocol.RoleOperator)
	for _, headers := range []map[string]string{
		{"X-Forwarded-User": "Owner", "X-Forwarded-Groups": "studio-admins"},
		{"X-Forwarded-User": "owner", "X-Forwarded-Groups": "studio-ops"}, // would demote it
		{"X-Forwarded-User": "OWNER"},
		{"X-Forwarded-User": "Alice", "X-Forwarded-Groups": "studio-admins"},
	} {
		status, who, perr := proxyCall(t, h.srv.URL, "", headers)
		if status != http.StatusForbidden || perr == nil || perr.Code != protocol.Denied || perr.Details["reason"] != "local_principal" {
			t.Fatalf("%v: %d %+v %+v; want 403 denied, reason local_principal", headers, status, who, perr)
		}
	}
	for name, role := range map[string]protocol.Role{"owner": protocol.RoleAdmin, "alice": protocol.RoleOperator} {
		p, err := h.store.GetPrincipal(ctx, name)
		if err != nil || p.Role != role || p.Origin != protocol.OriginLocal {
			t.Fatalf("%s after the refused sign-ins: %+v, %v; want a local %s", name, p, err, role)
		}
	}
	if rows, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Actor: httpapi.AuthProxyActor}); err != nil || len(rows) != 0 {
		t.Fatalf("the proxy changed something: %+v, %v", rows, err)
	}

	// An admin links the proxy's user alice@corp to alice.
	linked, err := h.client.LinkPrincipal(ctx, "alice", "Alice@Corp")
	if err != nil || linked.ProxyUser == nil || *linked.ProxyUser != "alice@corp" || linked.Origin != protocol.OriginLocal {
		t.Fatalf("link: %+v, %v", linked, err)
	}
	status, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "alice@corp", "X-Forwarded-Groups": "studio-admins, x"})
	if status != http.StatusOK || who.Name != "alice" || who.Role != protocol.RoleOperator || who.Origin != protocol.OriginLocal ||
		strings.Join(who.Groups, ",") != "studio-admins,x" {
		t.Fatalf("the linked user: %d %+v %+v; want alice, operator (the groups do not set a linked role), groups carried", status, who, perr)
	}
	if status, _, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "alice"}); status != http.StatusForbidden {
		t.Fatalf("the proxy user alice, not the one linked: %d %+v", status, perr)
	}
	rows, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: httpapi.ActionPrincipalLinked})
	if err != nil || len(rows) != 1 || rows[0].Actor != httpapi.OwnerName || !strings.Contains(string(rows[0].Details), "alice@corp") {
		t.Fatalf("link audit %+v, %v", rows, err)
	}
	// A proxy principal is never linked; nor is one user to two principals.
	if _, _, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "pat"}); perr != nil {
		t.Fatal(perr)
	}
	if _, err := h.client.LinkPrincipal(ctx, "pat", "someone"); !protocol.IsCode(err, protocol.Validation) {
		t.Fatalf("linking a proxy principal: %v, want validation", err)
	}
	if _, err := h.client.LinkPrincipal(ctx, "owner", "alice@corp"); !protocol.IsCode(err, protocol.Conflict) {
		t.Fatalf("one user linked twice: %v, want conflict", err)
	}
	// Unlinked, the user is refused again.
	if _, err := h.client.UnlinkPrincipal(ctx, "Alice"); err != nil {
		t.Fatal(err)
	}
	status, _, perr = proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "alice@corp"})
	if status != http.StatusOK || perr != nil {
		t.Fatalf("after the unlink: %d %+v; want a new proxy principal alice@corp", status, perr)
	}
	if p, err := h.store.GetPrincipal(ctx, "alice@corp"); err != nil || p.Origin != protocol.OriginProxy {
		t.Fatalf("alice@corp: %+v, %v", p, err)
	}
	if rows, err := h.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: httpapi.ActionPrincipalUnlinked}); err != nil || len(rows) != 1 {
		t.Fatalf("unlink audit %+v, %v", rows, err)
	}
}

// TestAuthProxyRefusesRepeatedHeaders: a user or groups header sent twice
// is 400 validation (reason repeated_header), not merged: the highest
// role of both lines never wins, and nothing changes.
func TestAuthProxyRefusesRepeatedHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback,
		DefaultRole: protocol.RoleViewer, GroupsHeader: "X-Forwarded-Groups",
		GroupRoles: map[string]protocol.Role{"studio-admins": protocol.RoleAdmin, "studio-ops": protocol.RoleOperator}}})
	if _, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "carol", "X-Forwarded-Groups": "studio-ops"}); who.Role != protocol.RoleOperator {
		t.Fatalf("carol: %+v %+v", who, perr)
	}
	for _, headers := range []map[string]string{
		{"X-Forwarded-User": "carol", "X-Forwarded-Groups": "studio-ops\nstudio-admins"},
		{"X-Forwarded-User": "carol", "X-Forwarded-Groups": "\nstudio-admins"},
		{"X-Forwarded-User": "carol\nmallory", "X-Forwarded-Groups": "studio-ops"},
		{"X-Forwarded-User": "carol\ncarol"},
	} {
		status, who, perr := proxyCall(t, h.srv.URL, "", headers)
		if status != http.StatusBadRequest || perr == nil || perr.Code != protocol.Validation || perr.Details["reason"] != "repeated_header" {
			t.Fatalf("%q: %d %+v %+v; want 400 validation, reason repeated_header", headers, status, who, perr)
		}
	}
	if p, err := h.store.GetPrincipal(h.ctx(), "carol"); err != nil || p.Role != protocol.RoleOperator {
		t.Fatalf("carol after the refusals: %+v, %v", p, err)
	}
	if _, err := h.store.GetPrincipal(h.ctx(), "mallory"); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("mallory: %v", err)
	}
}

// TestPrincipalNamesRefuseLookAlikes: from the proxy and the admin API
// alike, a name is taken in its PRECIS form (KIRK is kirk), a name with a
// character that only imitates another (Kirk with U+212A KELVIN SIGN)
// or that mixes scripts is 400 validation, and a name that looks like an
// existing one (rnodern for modern) is 409 conflict; nothing is created.
func TestPrincipalNamesRefuseLookAlikes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback,
		DefaultRole: protocol.RoleOperator}})
	ctx := h.ctx()
	if _, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "kirk"}); perr != nil || who.Name != "kirk" {
		t.Fatalf("kirk: %+v %+v", who, perr)
	}
	if _, err := h.client.CreatePrincipal(ctx, "Modern", protocol.RoleViewer); err != nil {
		t.Fatal(err)
	}
	h.principalToken("bob1", protocol.RoleViewer) // stored without a look-alike key, as before the upgrade
	before, err := h.store.ListPrincipals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy: KIRK is kirk, and the look-alikes are refused.
	if _, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": "KIRK"}); perr != nil || who.Name != "kirk" {
		t.Fatalf("KIRK: %+v %+v", who, perr)
	}
	for user, want := range map[string]protocol.ErrorCode{
		"\u212Airk": protocol.Validation, // KELVIN SIGN
		"ｋｉｒｋ":      protocol.Validation, // fullwidth
		"k\u0456rk": protocol.Validation, // a Cyrillic і among Latin letters
		"rnodern":   protocol.Conflict,   // looks like modern
		"bobl":      protocol.Conflict,   // looks like bob1, a name from before keys
	} {
		status, who, perr := proxyCall(t, h.srv.URL, "", map[string]string{"X-Forwarded-User": user})
		if perr == nil || perr.Code != want || status != want.HTTPStatus() {
			t.Fatalf("proxy user %q: %d %+v %+v; want %s", user, status, who, perr, want)
		}
	}
	// The admin API (and the CLI through it).
	for name, want := range map[string]protocol.ErrorCode{
		"\u212Airk": protocol.Validation,
		"KIRK":      protocol.Conflict, // kirk's name
		"kirk":      protocol.Conflict,
		"rnodern":   protocol.Conflict,
		"bobl":      protocol.Conflict,
		"p\u0430t":  protocol.Validation,
	} {
		if _, err := h.client.CreatePrincipal(ctx, name, protocol.RoleViewer); !protocol.IsCode(err, want) {
			t.Fatalf("admin create %q: %v; want %s", name, err, want)
		}
	}
	after, err := h.store.ListPrincipals(ctx)
	if err != nil || len(after) != len(before) {
		t.Fatalf("principals %+v, %v; want the %d before", after, err, len(before))
	}
	// A principal is addressed by any form of its name.
	if p, err := h.client.SetPrincipalRole(ctx, "MODERN", protocol.RoleOperator); err != nil || p.Name != "modern" {
		t.Fatalf("role of MODERN: %+v, %v", p, err)
	}
}

// proxyRequest sends method path from the proxy's address as its user.
func proxyRequest(t *testing.T, method, url, user, body string) (int, []byte) {
	t.Helper()
	header := http.Header{}
	if user != "" {
		header.Set("X-Forwarded-User", user)
	}
	return rawCall(t, method, url, header, body)
}

// TestTicketOfAnUnlinkedProxyUserIsSpent: a stream ticket minted by a
// proxy user linked to a local principal is redeemed as the user signs in
// now: once an admin removed the link, the ticket opens nothing (401),
// although the principal it was minted as is still enabled; a ticket
// minted while linked and redeemed while linked opens the stream.
func TestTicketOfAnUnlinkedProxyUserIsSpent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{principals: true, authProxy: &httpapi.AuthProxy{Header: "X-Forwarded-User", Trusted: loopback,
		DefaultRole: protocol.RoleViewer}})
	ctx := h.ctx()
	h.principalToken("alice", protocol.RoleOperator)
	if _, err := h.client.LinkPrincipal(ctx, "alice", "alice@corp"); err != nil {
		t.Fatal(err)
	}
	conv := h.conversation() // the owner's, team-visible
	mint := func() string {
		t.Helper()
		status, b := proxyRequest(t, http.MethodPost, h.srv.URL+"/api/operator/stream-tickets", "alice@corp",
			`{"conversationId":"`+conv.ID+`"}`)
		var tk protocol.StreamTicket
		if status != http.StatusCreated && status != http.StatusOK || protocol.Unmarshal(b, &tk) != nil || tk.Ticket == "" {
			t.Fatalf("mint: %d %s", status, b)
		}
		return tk.Ticket
	}
	redeem := func(ticket string) int {
		t.Helper()
		status, _ := proxyRequest(t, http.MethodGet, h.srv.URL+"/api/operator/conversations/"+conv.ID+"/stream?ticket="+ticket, "", "")
		return status
	}
	if status := redeem(mint()); status != http.StatusOK {
		t.Fatalf("a linked user's ticket: %d, want the stream", status)
	}
	ticket := mint()
	if _, err := h.client.UnlinkPrincipal(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if status := redeem(ticket); status != http.StatusUnauthorized {
		t.Fatalf("the ticket after the unlink: %d, want 401", status)
	}
}
