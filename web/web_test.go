package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/web"
)

func newServer(t *testing.T) (*httptest.Server, *web.Handler) {
	t.Helper()
	h, err := web.New(spaces.Default)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	// The API's catch-all must not conflict with the page's routes.
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "api", http.StatusTeapot) })
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, h
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func checkSecurityHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
		"connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", res.Request.URL.Path, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
		t.Errorf("CSP allows too much: %q", csp)
	}
	if res.Header.Get("Referrer-Policy") != "no-referrer" || res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: security headers %v", res.Request.URL.Path, res.Header)
	}
}

func TestPageAtEverySpacePath(t *testing.T) {
	srv, h := newServer(t)
	for _, sp := range spaces.Default.Spaces {
		res, body := get(t, srv.URL+sp.Path+"?view=fleet")
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", sp.Path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		checkSecurityHeaders(t, res)
		if !strings.Contains(body, `src="`+h.AssetBase()+`/js/main.js"`) || strings.Contains(body, "{{") {
			t.Fatalf("%s: index does not reference the hashed assets:\n%s", sp.Path, body)
		}
		if res.Header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("index Cache-Control %q", res.Header.Get("Cache-Control"))
		}
		if res2, _ := get(t, srv.URL+sp.Path, "If-None-Match", res.Header.Get("ETag")); res2.StatusCode != http.StatusNotModified {
			t.Fatalf("conditional index: %d", res2.StatusCode)
		}
	}
	for _, p := range []string{"/nope", "/designer/x", "/assets/", "/assets/x/js/missing.js", "/assets/" + "x/../index.html"} {
		if res, _ := get(t, srv.URL+p); res.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, res.StatusCode)
		}
	}
	if res, _ := get(t, srv.URL+"/api/anything"); res.StatusCode != http.StatusTeapot {
		t.Errorf("/api/ is not left to the API: %d", res.StatusCode)
	}
}

func TestAssetsTypesAndCaching(t *testing.T) {
	srv, h := newServer(t)
	_, index := get(t, srv.URL+"/")
	refs := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index references %v", refs)
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	for _, r := range refs {
		res, body := get(t, srv.URL+r[1])
		if res.StatusCode != 200 || body == "" {
			t.Fatalf("%s: %d", r[1], res.StatusCode)
		}
		ext := r[1][strings.LastIndex(r[1], "."):]
		if got := res.Header.Get("Content-Type"); got != types[ext] {
			t.Errorf("%s: Content-Type %q, want %q", r[1], got, types[ext])
		}
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q", r[1], cc)
		}
		checkSecurityHeaders(t, res)
	}
	// A module imported relatively resolves under the same hashed base.
	res, _ := get(t, srv.URL+h.AssetBase()+"/js/stream.js")
	if res.StatusCode != 200 {
		t.Fatalf("stream.js: %d", res.StatusCode)
	}
	// An older page's hash still gets the file, revalidated.
	res, _ = get(t, srv.URL+"/assets/000000000000/js/stream.js")
	if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("old hash: %d %q", res.StatusCode, res.Header.Get("Cache-Control"))
	}
}

// No inline script or style anywhere: the CSP would block it, so it would
// be a silent breakage.
func TestNoInlineScriptOrStyle(t *testing.T) {
	srv, _ := newServer(t)
	_, index := get(t, srv.URL+"/")
	if regexp.MustCompile(`<script(?:[^>]*)>[^<]+</script>|<style|style="|\son[a-z]+="`).MatchString(index) {
		t.Fatalf("index.html has inline script or style:\n%s", index)
	}
}

// TestNoHTMLSinks: no module parses strings as HTML or code, so no model or
// daemon text can become markup or script (and the CSP stays satisfiable).
func TestNoHTMLSinks(t *testing.T) {
	sinks := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(|setAttribute\(\s*['"](style|on[a-z]+)['"]|DOMParser|createContextualFragment`)
	err := filepath.WalkDir("static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".js") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if sinks.MatchString(line) {
				t.Errorf("%s:%d uses an HTML or code sink: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNotFoundIsThePage: the not-found answer for a browser is the page
// itself with status 404 (the cockpit then says so in its shell), with the
// page's security headers and no caching.
func TestNotFoundIsThePage(t *testing.T) {
	t.Parallel()
	_, h := newServer(t)
	srv := httptest.NewServer(http.HandlerFunc(h.NotFound))
	defer srv.Close()
	res, body := get(t, srv.URL+"/nope")
	if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	checkSecurityHeaders(t, res)
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", res.Header.Get("Cache-Control"))
	}
	if !strings.Contains(body, `src="`+h.AssetBase()+`/js/main.js"`) {
		t.Fatalf("the not-found answer is not the page:\n%s", body)
	}
}
