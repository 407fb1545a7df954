package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// idpUsers are the users the stand-in identity provider signs in, by
// session cookie.
var idpUsers = map[string]string{
	"alice":  "Alice@Example.com",
	"owner":  "Owner",                 // an IdP user named like the bootstrap admin
	"kelvin": "\u212Airk@example.com", // a KELVIN SIGN for the K of kirk
}

func cookieValue(c *http.Cookie, err error) string {
	if err != nil {
		return ""
	}
	return c.Value
}

// TestCaddyForwardAuthExample runs deploy/auth-proxy/Caddyfile with the
// real Caddy in front of the built daemon, with a stand-in for
// oauth2-proxy's /oauth2/auth (a cookie decides who is signed in): a
// browser without a session is sent to the sign-in page, one with a
// session acts for its user with its groups' role, and an identity header
// the browser forges never reaches the daemon. The IdP's user Owner (in
// the admins' group) is refused, not the bootstrap admin, and a user
// spelled with a look-alike character is refused. Caddy comes from Debian
// (.ci/run installs it); without it the test skips, unless
// STUDIO_REQUIRE_CADDY=1 (CI) makes that a failure.
func TestCaddyForwardAuthExample(t *testing.T) {
	t.Parallel()
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		if os.Getenv("STUDIO_REQUIRE_CADDY") == "1" {
			t.Fatal("caddy is required (STUDIO_REQUIRE_CADDY=1) but not installed: apt-get install caddy")
		}
		t.Skip("caddy not installed")
	}
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/oauth2/auth":
			c, err := r.Cookie("_oauth2_proxy")
			if user, ok := idpUsers[cookieValue(c, err)]; ok {
				w.Header().Set("X-Auth-Request-Email", user)
				w.Header().Set("X-Auth-Request-Groups", "staff,studio-ops")
				if user == "Owner" {
					w.Header().Set("X-Auth-Request-Groups", "studio-admins")
				}
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.WriteHeader(http.StatusUnauthorized)
		default:
			_, _ = io.WriteString(w, "sign in here")
		}
	}))
	t.Cleanup(auth.Close)
	d := startDaemon(t, t.TempDir(), "--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-trusted", "127.0.0.1",
		"--auth-proxy-groups-header", "X-Forwarded-Groups", "--auth-proxy-group-role", "studio-admins=admin,studio-ops=operator")

	// The example, with this machine's addresses for the compose services'.
	example, err := os.ReadFile("../../deploy/auth-proxy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	site := fmt.Sprintf("http://127.0.0.1:%d", port)
	conf := strings.NewReplacer("{$STUDIO_HOST:localhost}", site,
		"oauth2-proxy:4180", strings.TrimPrefix(auth.URL, "http://"),
		"studio:8765", strings.TrimPrefix(d.URL, "http://")).Replace(string(example))
	for _, name := range []string{"oauth2-proxy:4180", "studio:8765", "{$STUDIO_HOST"} {
		if strings.Contains(conf, name) {
			t.Fatalf("the example changed: %s is left in\n%s", name, conf)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte("{\n\tadmin off\n}\n"+conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, caddy, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	get := func(cookie, forged string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, site+"/api/auth/whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "_oauth2_proxy", Value: cookie})
		}
		if forged != "" {
			req.Header.Set("X-Forwarded-User", forged)
			req.Header.Set("X-Forwarded-Groups", "studio-admins")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// Caddy serves once it has started: wait for its first answer.
	testutil.Eventually(t, func() bool {
		select {
		case <-exited:
			t.Fatalf("caddy exited:\n%s", logs.String())
		default:
		}
		resp, _ := get("", "")
		return resp != nil
	}, "caddy's first answer")

	resp, body := get("", "owner")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "/oauth2/sign_in?rd=") {
		t.Fatalf("without a session: %d %q %s; want a redirect to the sign-in page", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	for _, forged := range []string{"", "owner"} {
		resp, body = get("alice", forged)
		var who protocol.Whoami
		if resp.StatusCode != http.StatusOK || protocol.Unmarshal([]byte(body), &who) != nil || who.Name != "alice@example.com" || who.Role != protocol.RoleOperator {
			t.Fatalf("signed in as alice (forged %q): %d %s; want alice@example.com, operator", forged, resp.StatusCode, body)
		}
	}
	for cookie, want := range map[string]int{"owner": http.StatusForbidden, "kelvin": http.StatusBadRequest} {
		if resp, body = get(cookie, ""); resp.StatusCode != want {
			t.Fatalf("the IdP's %s: %d %s; want %d", idpUsers[cookie], resp.StatusCode, body, want)
		}
	}
	if who, err := d.client.Whoami(t.Context()); err != nil || who.Name != "owner" || who.Role != protocol.RoleAdmin {
		t.Fatalf("the bootstrap admin after the IdP's Owner: %+v, %v", who, err)
	}
}

// freePort is a loopback TCP port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
