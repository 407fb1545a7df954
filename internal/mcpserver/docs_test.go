package mcpserver_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/tools"
)

var update = flag.Bool("update", false, "rewrite docs/mcp-tools.md")

// TestToolsDocIsFresh: docs/mcp-tools.md lists the tools as the server
// offers them.
func TestToolsDocIsFresh(t *testing.T) {
	const path = "../../docs/mcp-tools.md"
	s := mcpserver.New(mcpserver.Config{Tools: tools.Default(nil, spaces.Default, time.Now)})
	want := s.ToolsMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: go test ./internal/mcpserver -run ToolsDoc -update", path)
	}
}
