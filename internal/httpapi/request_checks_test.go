package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/studio/operator/internal/httpapi"
)

// send is one request to the harness's daemon with a raw header set.
func (h *harness) send(method, path string, header http.Header, body string) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func withAuth(auth, contentType string) http.Header {
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return h
}

// The cancel's body is checked (empty or a JSON object), Content-Type is
// matched by media type in any case, and the bearer scheme is
// case-insensitive.
func TestRequestBodiesAndCredentialsAreCheckedExactly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	acc := h.submit(c.ID, "hi")
	h.waitDone(c.ID, acc.RequestID)
	cancel := "/api/operator/conversations/" + c.ID + "/requests/" + acc.RequestID + "/cancel"
	for body, want := range map[string]int{"": 200, "{}": 200, "{": 400, "[]": 400, `"x"`: 400, `{"reason":"x"}`: 400} {
		if a := h.send("POST", cancel, withAuth("Bearer "+testToken, "application/json"), body); a.status != want {
			t.Errorf("cancel with body %q: %d %s, want %d", body, a.status, a.body, want)
		}
	}
	for ct, want := range map[string]int{"application/json": 201, "application/json; charset=utf-8": 201, "APPLICATION/JSON": 201,
		"Application/Json ; charset=UTF-8": 201, "application/jsonx": 400, "application/json-seq": 400, "text/plain": 400, "application/": 400} {
		if a := h.send("POST", "/api/operator/conversations", withAuth("Bearer "+testToken, ct), "{}"); a.status != want {
			t.Errorf("Content-Type %q: %d %s, want %d", ct, a.status, a.body, want)
		}
	}
	for auth, want := range map[string]int{"bearer " + testToken: 200, "BEARER " + testToken: 200, "Bearer  " + testToken: 200,
		"Bearer" + testToken: 401, "Basic " + testToken: 401, "bearer": 401, "Bearer x" + testToken: 401} {
		if a := h.send("GET", "/api/operator/conversations", withAuth(auth, ""), ""); a.status != want {
			t.Errorf("Authorization %q: %d, want %d", auth, a.status, want)
		}
	}
}

// The stream checks credentials before its cursor, refuses a ticket beside
// any other credential, and no ticket is issued for a cursor it refuses.
func TestStreamCredentialsComeFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.conversation()
	stream := "/api/operator/conversations/" + c.ID + "/stream"
	for _, q := range []string{"?after_sequence=x", "?after_sequence=-1", "?after_sequence=99999999999999999999"} {
		if a := h.send("GET", stream+q, withAuth("", ""), ""); a.status != 401 || a.typedCode() != "auth_required" {
			t.Errorf("no credentials, cursor %s: %d %s", q, a.status, a.body)
		}
		if a := h.send("GET", stream+q, withAuth("Bearer "+testToken, ""), ""); a.status != 400 {
			t.Errorf("token, cursor %s: %d %s", q, a.status, a.body)
		}
	}
	ticket := func(after int64) (string, answer) {
		body, _ := json.Marshal(map[string]any{"conversationId": c.ID, "afterSequence": after})
		a := h.send("POST", "/api/operator/stream-tickets", withAuth("Bearer "+testToken, "application/json"), string(body))
		var tk struct{ Ticket string }
		_ = json.Unmarshal(a.body, &tk)
		return tk.Ticket, a
	}
	for _, after := range []int64{-1, 1<<62 + 1} {
		if _, a := ticket(after); a.status != 400 || a.typedCode() != "validation" {
			t.Errorf("ticket for cursor %d: %d %s", after, a.status, a.body)
		}
	}
	for _, extra := range []string{"&token=" + testToken, "&access_token=" + testToken, "&token=x"} {
		tk, a := ticket(0)
		if a.status != 201 || tk == "" {
			t.Fatalf("ticket: %d %s", a.status, a.body)
		}
		if a := h.send("GET", stream+"?after_sequence=0&ticket="+tk+extra, withAuth("", ""), ""); a.status != 401 {
			t.Errorf("ticket with %s: %d %s", extra, a.status, a.body)
		}
	}
	// A ticket with a cursor the stream refuses is an auth failure: no
	// ticket is issued for one.
	tk, _ := ticket(0)
	if a := h.send("GET", stream+"?after_sequence=x&ticket="+tk, withAuth("", ""), ""); a.status != 401 {
		t.Errorf("ticket with a bad cursor: %d %s", a.status, a.body)
	}
}

// The access log names no secret that a client put in a path, and no
// query string.
func TestAccessLogRedactsPathsAndDropsQueries(t *testing.T) {
	t.Parallel()
	d := newEdgeDaemon(t, nil)
	logs := &syncBuffer{}
	observed := httpapi.Observe(d.api, httpapi.ObserveConfig{Logger: slog.New(slog.NewTextHandler(logs, nil)), Route: d.api.Route})
	srv := httptest.NewServer(observed)
	t.Cleanup(srv.Close)
	secrets := []string{"sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123", "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "AKIAIOSFODNN7EXAMPLE"}
	for _, s := range secrets {
		for _, p := range []string{"/api/app/playbooks/" + s, "/api/app/runs/run_" + s + "?ticket=T0pS3cretTicket&x=" + s} {
			req, _ := http.NewRequest("GET", srv.URL+p, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	out := logs.String()
	if !strings.Contains(out, "/api/app/playbooks/[redacted]") {
		t.Errorf("the log does not show the redacted path:\n%s", out)
	}
	for _, s := range append(secrets, "T0pS3cretTicket", "ticket=") {
		if strings.Contains(out, s) {
			t.Errorf("the access log holds %q:\n%s", s, out)
		}
	}
}
