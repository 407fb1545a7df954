package main

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// proxyWhoami is GET /api/auth/whoami with the proxy's headers, each
// value a line of its own (a header sent twice is two values).
func proxyWhoami(t *testing.T, base string, headers map[string][]string) (int, protocol.Whoami, *protocol.Error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/auth/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb protocol.ErrorBody
		if err := protocol.Unmarshal(b, &eb); err != nil || eb.Error == nil {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return resp.StatusCode, protocol.Whoami{}, eb.Error
	}
	var who protocol.Whoami
	if err := protocol.Unmarshal(b, &who); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, who, nil
}

// TestProxyIdentityFromTheBinary drives the identity seams of the sign-in
// proxy through the built daemon and CLI: Owner is refused (403
// local_principal) and neither becomes nor demotes the bootstrap admin; a
// user spelled with a Kelvin sign does not become kirk; a groups header
// sent twice is 400 repeated_header, not the highest role of both; an
// admin's `studio principals link` (audited) lets the proxy's user sign in
// as the local principal, and `studio principals list` shows origins and
// links.
func TestProxyIdentityFromTheBinary(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-trusted", "127.0.0.0/8,::1",
		"--auth-proxy-groups-header", "X-Forwarded-Groups", "--auth-proxy-group-role", "studio-admins=admin,studio-ops=operator")
	ctx := t.Context()
	user := func(name string, groups ...string) map[string][]string {
		h := map[string][]string{"X-Forwarded-User": {name}}
		if groups != nil {
			h["X-Forwarded-Groups"] = groups
		}
		return h
	}
	for _, h := range []map[string][]string{user("Owner", "studio-admins"), user("owner", "studio-ops"), user("OWNER")} {
		status, who, perr := proxyWhoami(t, d.URL, h)
		if status != http.StatusForbidden || perr.Code != protocol.Denied || perr.Details["reason"] != "local_principal" {
			t.Fatalf("%v: %d %+v %+v; want 403 local_principal", h, status, who, perr)
		}
	}
	if who, err := d.client.Whoami(ctx); err != nil || who.Name != "owner" || who.Role != protocol.RoleAdmin || who.Origin != protocol.OriginLocal {
		t.Fatalf("the owner after the proxy's Owner: %+v, %v", who, err)
	}

	// kirk, then Kirk with a Kelvin sign: refused, not kirk.
	if status, who, perr := proxyWhoami(t, d.URL, user("kirk", "studio-ops")); status != http.StatusOK || who.Name != "kirk" ||
		who.Origin != protocol.OriginProxy || who.Role != protocol.RoleOperator || strings.Join(who.Groups, ",") != "studio-ops" {
		t.Fatalf("kirk: %d %+v %+v", status, who, perr)
	}
	if status, who, perr := proxyWhoami(t, d.URL, user("\u212Airk", "studio-ops")); status != http.StatusBadRequest || perr.Details["reason"] != "confusable" {
		t.Fatalf("Kirk with a Kelvin sign: %d %+v %+v; want 400 confusable", status, who, perr)
	}
	// Two groups lines: refused, not merged into admin.
	status, who, perr := proxyWhoami(t, d.URL, user("kirk", "studio-ops", "studio-admins"))
	if status != http.StatusBadRequest || perr.Code != protocol.Validation || perr.Details["reason"] != "repeated_header" {
		t.Fatalf("groups sent twice: %d %+v %+v; want 400 repeated_header", status, who, perr)
	}
	if _, who, _ := proxyWhoami(t, d.URL, user("kirk", "studio-ops")); who.Role != protocol.RoleOperator {
		t.Fatalf("kirk after the refusal: %+v", who)
	}

	// The admin links a proxy user to owner through the CLI.
	env := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	if out, errOut, code := runStudio(t, env, "principals", "link", "owner", "--proxy-user", "Admin@Corp.Example"); code != exitOK {
		t.Fatalf("principals link: exit %d\n%s%s", code, out, errOut)
	}
	if status, who, perr := proxyWhoami(t, d.URL, user("admin@corp.example", "studio-ops")); status != http.StatusOK ||
		who.Name != "owner" || who.Role != protocol.RoleAdmin {
		t.Fatalf("the linked user: %d %+v %+v; want owner, still admin", status, who, perr)
	}
	out, errOut, code := runStudio(t, env, "principals", "list")
	if code != exitOK {
		t.Fatalf("principals list: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"ORIGIN", "PROXY USER", "admin@corp.example", "proxy", "local"} {
		if !strings.Contains(out, want) {
			t.Fatalf("principals list lacks %q:\n%s", want, out)
		}
	}
	page, err := d.client.ListAudit(ctx, url.Values{"action": {"studio.principal.linked"}})
	if err != nil || len(page.Events) != 1 || page.Events[0].Actor != "owner" {
		t.Fatalf("the link's audit: %+v, %v", page, err)
	}
}

// TestTokenFileRotation: a new data directory's token file holds a stu_
// token; one from before stu_ tokens keeps working (with a warning) until
// `studio token --rotate`, which writes a stu_ token in its place and
// revokes the old one.
func TestTokenFileRotation(t *testing.T) {
	t.Parallel()
	fresh := t.TempDir()
	startDaemon(t, fresh)
	if b, err := os.ReadFile(filepath.Join(fresh, "token")); err != nil || !strings.HasPrefix(string(b), "stu_") {
		t.Fatalf("a new token file: %q, %v; want a stu_ token", b, err)
	}

	dataDir := t.TempDir()
	legacy := base64.RawURLEncoding.EncodeToString([]byte("an old token file: 32 bytes long"))
	if err := os.WriteFile(filepath.Join(dataDir, "token"), []byte(legacy+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dataDir)
	testutil.Eventually(t, func() bool { return strings.Contains(d.Logs(), "studio token --rotate") }, "the warning about the old token file")
	if who, err := d.client.Whoami(t.Context()); err != nil || who.Name != "owner" {
		t.Fatalf("the old token: %+v, %v", who, err)
	}
	env := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	out, errOut, code := runStudio(t, env, "token", "--rotate")
	if code != exitOK {
		t.Fatalf("token --rotate: exit %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil || !strings.HasPrefix(string(b), "stu_") || strings.TrimSpace(string(b)) != strings.TrimSpace(out) {
		t.Fatalf("the token file after --rotate: %q (printed %q), %v", b, out, err)
	}
	if info, err := os.Stat(filepath.Join(dataDir, "token")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the token file's mode: %v, %v", info, err)
	}
	if _, err := d.client.Whoami(t.Context()); !protocol.IsCode(err, protocol.AuthRequired) {
		t.Fatalf("the old token after --rotate: %v, want auth_required", err)
	}
	if out, _, code := runStudio(t, env, "whoami"); code != exitOK || !strings.HasPrefix(out, "owner (admin") {
		t.Fatalf("whoami with the rotated file: exit %d %s", code, out)
	}
	// The CLI refuses --rotate with --create.
	if _, _, code := runStudio(t, env, "token", "--rotate", "--create"); code != exitUsage {
		t.Fatalf("--rotate --create: exit %d", code)
	}
}
