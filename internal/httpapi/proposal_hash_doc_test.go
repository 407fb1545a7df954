package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestDocumentedCommandHashConfirms computes a proposal's commandHash the
// way docs/protocol.md §6 tells a client to — from the proposal as the API
// serves it, with nothing of this daemon's code — and confirms with it
// over HTTP. The hash of the command alone (what the section once also
// said) is refused with 409 and executes nothing.
func TestDocumentedCommandHashConfirms(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	start, end := strings.Index(sec, "## 6. Proposals"), strings.Index(sec, "## 7.")
	if start < 0 || end < start {
		t.Fatal("docs/protocol.md has no section 6 before section 7")
	}
	sec = sec[start:end]
	const formula = "`{\"command\": command, \"proposalId\": id}`"
	if !strings.Contains(strings.Join(strings.Fields(sec), " "), formula) {
		t.Fatalf("section 6 no longer describes the hash as the JCS of %s", formula)
	}
	if strings.Contains(sec, "canonical JSON of `command`.") {
		t.Fatal("section 6 also says the hash is of command alone")
	}

	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	_, prop := h.proposed(c.ID)
	do := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(h.ctx(), method, h.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	code, b := do("GET", "/api/operator/proposals/"+prop.ID, "")
	if code != http.StatusOK {
		t.Fatalf("GET proposal: %d %s", code, b)
	}
	var served struct {
		ID          string          `json:"id"`
		Command     json.RawMessage `json:"command"`
		CommandHash string          `json:"commandHash"`
		Target      *struct {
			Version int64 `json:"version"`
		} `json:"target"`
	}
	if err := json.Unmarshal(b, &served); err != nil {
		t.Fatal(err)
	}
	hashOf := func(v []byte) string {
		c := jsontext.Value(v)
		if err := c.Canonicalize(); err != nil { // RFC 8785
			t.Fatal(err)
		}
		sum := sha256.Sum256(c)
		return hex.EncodeToString(sum[:])
	}
	id, _ := json.Marshal(served.ID)
	documented := hashOf([]byte(`{"command":` + string(served.Command) + `,"proposalId":` + string(id) + `}`))
	if documented != served.CommandHash {
		t.Fatalf("the documented hash %s is not the proposal's %s", documented, served.CommandHash)
	}
	version := ""
	if served.Target != nil {
		version, _ = strings.CutSuffix(string(mustJSON(t, served.Target.Version)), "\n")
		version = `,"expectedTargetVersion":` + version
	}
	confirm := func(hash string) (int, []byte) {
		return do("POST", "/api/operator/conversations/"+c.ID+"/proposals/"+served.ID+"/confirm", `{"expectedCommandHash":"`+hash+`"`+version+`}`)
	}
	if code, b := confirm(hashOf(served.Command)); code != http.StatusConflict {
		t.Fatalf("the hash of the command alone: %d %s, want 409", code, b)
	}
	code, b = confirm(documented)
	if code != http.StatusOK {
		t.Fatalf("confirm with the documented hash: %d %s", code, b)
	}
	var res struct{ Status string }
	if err := json.Unmarshal(b, &res); err != nil || res.Status != "succeeded" {
		t.Fatalf("confirm: %s", b)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
