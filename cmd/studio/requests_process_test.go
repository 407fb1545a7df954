package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// The built daemon's exact request checks and its access log: what a
// client sends is checked as docs/protocol.md says, and what the log keeps
// of a path never holds a secret or a query.

// call sends one request to d and returns the status and the error code of
// the typed answer ("" for a success).
func call(t *testing.T, d *daemon, method, path, contentType, auth, body string) (int, protocol.ErrorCode) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, d.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode < 300 {
		return res.StatusCode, ""
	}
	var e struct {
		Error protocol.Error `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s %s answered %d, not typed: %s", method, path, res.StatusCode, b)
	}
	return res.StatusCode, e.Error.Code
}

// TestProcessRequestsAreCheckedExactly: the bearer scheme in any case,
// Content-Type by media type in any case, a cancel's body, credentials
// before a stream's cursor, a ticket never beside a URL credential.
func TestProcessRequestsAreCheckedExactly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	token := readToken(t, dir)
	conv := newConversation(t, testCtx(t), d)
	for _, c := range []struct {
		name, method, path, contentType, auth, body string
		status                                      int
		code                                        protocol.ErrorCode
	}{
		{"bearer in lower case", "GET", "/api/operator/conversations", "", "bearer " + token, "", 200, ""},
		{"BEARER in upper case", "GET", "/api/operator/conversations", "", "BEARER " + token, "", 200, ""},
		{"another scheme", "GET", "/api/operator/conversations", "", "Basic " + token, "", 401, protocol.AuthRequired},
		{"JSON with a charset", "POST", "/api/operator/conversations", "application/json; charset=utf-8", "Bearer " + token, "{}", 201, ""},
		{"JSON in upper case", "POST", "/api/operator/conversations", "APPLICATION/JSON", "Bearer " + token, "{}", 201, ""},
		{"a media type that only starts like JSON", "POST", "/api/operator/conversations", "application/jsonx", "Bearer " + token, "{}", 400, protocol.Validation},
		{"a cancel with a malformed body", "POST", "/api/operator/conversations/" + conv.ID + "/requests/r/cancel", "application/json", "Bearer " + token, "{nope", 400, protocol.Validation},
		{"a stream without credentials and a bad cursor", "GET", "/api/operator/conversations/" + conv.ID + "/stream?after=x", "", "", "", 401, protocol.AuthRequired},
		{"a ticket beside a URL token", "GET", "/api/operator/conversations/" + conv.ID + "/stream?ticket=t&token=" + token, "", "", "", 401, protocol.AuthRequired},
	} {
		status, code := call(t, d, c.method, c.path, c.contentType, c.auth, c.body)
		if status != c.status || code != c.code {
			t.Errorf("%s: %d %q, want %d %q", c.name, status, code, c.status, c.code)
		}
	}
}

// TestProcessAccessLogKeepsNoSecret: a secret in a request's path is
// logged redacted, and a query string is never logged.
func TestProcessAccessLogKeepsNoSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	token := readToken(t, dir)
	const secret = "sk-proj-ZyXwVuTsRqPoNmLkJiHgFeDcBa0123456789abcd"
	call(t, d, "GET", "/api/app/playbooks/"+secret, "", "Bearer "+token, "")
	call(t, d, "GET", "/api/app/runs?q=hunter2-query-value", "", "Bearer "+token, "")
	// The request line is written as the handler returns, maybe after the
	// client read the answer: wait for both lines.
	var logs string
	testutil.Eventually(t, func() bool {
		logs = d.Logs()
		return strings.Contains(logs, "/api/app/playbooks/") && strings.Contains(logs, "path=/api/app/runs")
	}, "the two requests in the access log")
	if strings.Contains(logs, secret) || strings.Contains(logs, "sk-proj-ZyX") {
		t.Fatalf("the access log kept a secret from a path:\n%s", logs)
	}
	if strings.Contains(logs, "hunter2-query-value") {
		t.Fatalf("the access log kept a query string:\n%s", logs)
	}
}
