package web_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
)

// TestRegistryFixtureIsCurrent keeps web/test/routes.json — the registry the
// JavaScript unit tests use — equal to what GET /api/operator/routes serves.
// STUDIO_UPDATE_FIXTURES=1 rewrites it.
func TestRegistryFixtureIsCurrent(t *testing.T) {
	want, err := protocol.Marshal(spaces.Default)
	if err != nil {
		t.Fatal(err)
	}
	const path = "test/routes.json"
	if os.Getenv("STUDIO_UPDATE_FIXTURES") == "1" {
		var v any
		_ = json.Unmarshal(want, &v)
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s is not the current route registry; run STUDIO_UPDATE_FIXTURES=1 go test ./web -run TestRegistryFixtureIsCurrent", path)
	}
}
