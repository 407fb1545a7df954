package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/studio/operator/internal/httpapi"
)

// TestUnknownPageGetsTheCockpitsNotFound: a browser's GET of an address
// no route serves gets the cockpit's page (status 404), so the cockpit can
// say so in its own shell; API paths, other methods and clients that do not
// ask for HTML keep the typed not_found.
func TestUnknownPageGetsTheCockpitsNotFound(t *testing.T) {
	t.Parallel()
	const page = "<!doctype html><title>cockpit</title>"
	d := newEdgeDaemon(t, func(c *httpapi.Config) {
		c.NotFoundPage = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, page)
		}
	})
	do := func(method, path, accept string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, d.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	if code, ct, body := do("GET", "/nope", browser); code != 404 || !strings.HasPrefix(ct, "text/html") || body != page {
		t.Fatalf("a browser's /nope: %d %s %q", code, ct, body)
	}
	for _, c := range []struct{ method, path, accept string }{
		{"GET", "/nope", ""},
		{"GET", "/nope", "application/json"},
		{"GET", "/api/nope", browser},
		{"POST", "/nope", browser},
	} {
		code, ct, body := do(c.method, c.path, c.accept)
		// /api refuses the missing token first: typed all the same.
		typed := strings.Contains(body, `"not_found"`) || (strings.HasPrefix(c.path, "/api/") && strings.Contains(body, `"auth_required"`))
		if code/100 != 4 || !strings.HasPrefix(ct, "application/json") || !typed {
			t.Errorf("%s %s (Accept %q): %d %s %q, want a typed error", c.method, c.path, c.accept, code, ct, body)
		}
	}
}
