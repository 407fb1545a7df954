package openapi

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json and web/types/wire.d.ts")

// The repository keeps the generated document and declarations; they must
// match what this build generates.
func TestGeneratedFilesAreFresh(t *testing.T) {
	doc, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{
		"../../docs/openapi.json":   doc,
		"../../web/types/wire.d.ts": TypeScript(),
	} {
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v: run go test ./internal/openapi -update", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go test ./internal/openapi -update and commit it", path)
		}
	}
}

func TestDocumentShape(t *testing.T) {
	t.Parallel()
	doc, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !jsontext.Value(doc).IsValid() {
		t.Fatal("the document is not valid JSON")
	}
	seen := map[string]bool{}
	for _, op := range Operations() {
		key := op.Method + " " + op.Path
		if seen[key] || seen[op.ID] {
			t.Errorf("%s (%s) is listed twice", key, op.ID)
		}
		seen[key], seen[op.ID] = true, true
	}
	// Every $ref resolves to a component.
	m := build()
	for _, ref := range refPattern.FindAllSubmatch(doc, -1) {
		if _, ok := m.components[string(ref[1])]; !ok {
			t.Errorf("$ref to missing component %s", ref[1])
		}
	}
	ts := string(TypeScript())
	for _, want := range []string{"export type Frame = TextFrame | ToolCallFrame", "export interface ProtocolError", `code: "auth_required" |`,
		"export type Effect = NavigateEffect", "executionClass:"} {
		if !strings.Contains(ts, want) {
			t.Errorf("the declarations lack %q", want)
		}
	}
}

// TestErrorsBodiesAndComponents: every operation documents its 4xx (and,
// under /api, 5xx) answers with the error envelope, not only a default; a
// request body that an empty object would not satisfy is required; every
// schema in the document is used by an operation.
func TestErrorsBodiesAndComponents(t *testing.T) {
	t.Parallel()
	raw, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			RequestBody *struct {
				Required bool `json:"required"`
				Content  map[string]struct {
					Schema jsontext.Value `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]jsontext.Value `json:"responses"`
		} `json:"paths"`
		Components struct {
			Responses map[string]jsontext.Value `json:"responses"`
			Schemas   map[string]jsontext.Value `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			var fourxx, fivexx bool
			for status, r := range op.Responses {
				fourxx = fourxx || strings.HasPrefix(status, "4")
				fivexx = fivexx || strings.HasPrefix(status, "5")
				if status[0] == '4' || (status[0] == '5' && path != "/healthz" && path != "/readyz") { // probes answer their own body
					if !strings.Contains(string(r), "#/components/responses/") {
						t.Errorf("%s %s %s is not the error envelope: %s", method, path, status, r)
					}
				}
			}
			if !fourxx {
				t.Errorf("%s %s (%s) documents no 4xx answer", method, path, op.OperationID)
			}
			if strings.HasPrefix(path, "/api/") && op.OperationID != "openapi" && !fivexx {
				t.Errorf("%s %s (%s) documents no 5xx answer", method, path, op.OperationID)
			}
			if op.RequestBody != nil && !op.RequestBody.Required {
				// Optional only when {} is a valid body: no property required.
				body := string(op.RequestBody.Content["application/json"].Schema)
				if strings.Contains(body, `"required"`) {
					t.Errorf("%s %s: its body has required properties but is not required", method, path)
				}
				if m := refPattern.FindStringSubmatch(body); m != nil && strings.Contains(string(doc.Components.Schemas[m[1]]), `"required"`) {
					t.Errorf("%s %s: its body (%s) has required properties but is not required", method, path, m[1])
				}
			}
		}
	}
	for name := range doc.Components.Responses {
		if !bytes.Contains(raw, []byte(`"#/components/responses/`+name+`"`)) {
			t.Errorf("response %s is not used", name)
		}
	}
	for name := range doc.Components.Schemas {
		if !bytes.Contains(raw, []byte(`"#/components/schemas/`+name+`"`)) {
			t.Errorf("schema %s is not used by any operation or schema", name)
		}
	}
	// The submit of a turn needs its body.
	if b := doc.Paths["/api/operator/conversations/{id}/turns"]["post"].RequestBody; b == nil || !b.Required {
		t.Error("the turn's body is not required")
	}
}
