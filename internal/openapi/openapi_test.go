package openapi

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
