package e2e_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// signInProxy stands for oauth2-proxy in front of the daemon: /_login
// gives the browser a session cookie; a request with it is forwarded
// naming its user (X-Forwarded-User), any other without the header.
func signInProxy(t *testing.T, d *daemon, user string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_login" {
			http.SetCookie(w, &http.Cookie{Name: "_proxy_session", Value: "ok", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
			http.Redirect(w, r, "/", http.StatusFound)
			return
		}
		r.Header.Del("X-Forwarded-User")
		if c, err := r.Cookie("_proxy_session"); err == nil && c.Value == "ok" {
			r.Header.Set("X-Forwarded-User", user)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCockpitSignsInBehindAProxy: behind a sign-in proxy the cockpit asks
// for no token: the proxy's session (a cookie the page's requests carry)
// names the user, who is created with the default role and shown in the
// top bar, and whose requests (streams included) act as that user. Without
// the session the page asks for a token as before.
func TestCockpitSignsInBehindAProxy(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript, "--auth-proxy-header", "X-Forwarded-User", "--auth-proxy-trusted", "127.0.0.1/32",
		"--auth-proxy-default-role", "operator")
	proxy := signInProxy(t, d, "carol@example.com")
	behind := &daemon{URL: proxy.URL}

	p := openPageAs(t, behind, "/_login", "")
	p.waitJS(`document.querySelector('[data-me]') !== null`, "who is signed in, in the top bar")
	if who := eval[string](p, `document.querySelector('[data-me]').textContent + ' ' + document.querySelector('.role-badge').textContent`); who != "carol@example.com operator" {
		t.Fatalf("top bar %q, want carol@example.com operator", who)
	}
	if tok := eval[string](p, `sessionStorage.getItem('studio.token') || ''`); tok != "" {
		t.Fatalf("a token was stored behind the proxy: %q", tok)
	}
	// The dock works as carol: her conversation is hers.
	p.click(`.dock-toggle`)
	p.waitJS(`document.querySelector('.composer textarea') !== null && !document.querySelector('.composer textarea').disabled`, "the composer")
	p.shot("signed-in-by-proxy")

	// Without the proxy's session: the token form, as before.
	openSignedOut(t, behind, "/") // waits for the token form
}
