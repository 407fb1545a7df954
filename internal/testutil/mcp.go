package testutil

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/studio/operator/internal/protocol"
)

// MCPVersion is the newest MCP revision the daemon speaks: a client of it
// names the call's method and tool in headers.
const MCPVersion = "2026-07-28"

// MCPCall is one raw JSON-RPC message to a daemon's /mcp, for tests of
// what an official client would never send (a batch, an old revision's
// headers) or of the HTTP answer itself.
type MCPCall struct {
	URL   string // the daemon's base URL
	Token string // the bearer token
	Body  string // the JSON-RPC message (or batch)
	// Method, when set, makes the request a client of MCPVersion's: its
	// headers name the method and Name, the tool (for tools/call).
	Method, Name string
}

// MCPPost posts c and returns the answer's status and body.
func MCPPost(tb TB, ctx context.Context, c MCPCall) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/mcp", strings.NewReader(c.Body))
	if err != nil {
		tb.Fatalf("MCP request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if c.Method != "" {
		req.Header.Set("Mcp-Protocol-Version", MCPVersion)
		req.Header.Set("Mcp-Method", c.Method)
		if c.Name != "" {
			req.Header.Set("Mcp-Name", c.Name)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("MCP post: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// MCPToolError is the typed error of a tools/call result that is one
// (isError, the error in its structured content); nil for any other
// answer.
func MCPToolError(raw []byte) *protocol.Error {
	var msg struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Error *protocol.Error `json:"error"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &msg) != nil || !msg.Result.IsError {
		return nil
	}
	return msg.Result.StructuredContent.Error
}
