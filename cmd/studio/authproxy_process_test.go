package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// TestAuthProxyFromTheBinary: `studio serve --auth-proxy-header` signs a
// user in from the proxy's address (here loopback) and creates its
// principal with the groups' role; flags that make no sense alone are
// usage errors.
func TestAuthProxyFromTheBinary(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir(), "--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-trusted", "127.0.0.0/8,::1",
		"--auth-proxy-groups-header", "X-Forwarded-Groups", "--auth-proxy-group-role", "studio-admins=admin,studio-ops=operator")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, d.URL+"/api/auth/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-User", "dana")
	req.Header.Set("X-Forwarded-Groups", "studio-ops")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var who protocol.Whoami
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
	}
	if err := protocol.Unmarshal([]byte(b.String()), &who); err != nil || resp.StatusCode != http.StatusOK || who.Name != "dana" || who.Role != protocol.RoleOperator {
		t.Fatalf("whoami through the proxy header: %d %s", resp.StatusCode, b.String())
	}
	for _, args := range [][]string{
		{"--auth-proxy-header", "X-Forwarded-User"},                                                                      // no trusted addresses
		{"--auth-proxy-trusted", "10.0.0.0/8"},                                                                           // no header
		{"--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-trusted", "bogus"},                                     // a bad CIDR
		{"--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-trusted", "::1", "--auth-proxy-group-role", "a=admin"}, // roles without the groups header
	} {
		out, errOut, code := runStudio(t, nil, append([]string{"serve", "--data-dir", t.TempDir()}, args...)...)
		if code != exitUsage || !strings.Contains(out+errOut, "auth") && !strings.Contains(out+errOut, "group") {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, exitUsage, out, errOut)
		}
	}
}
