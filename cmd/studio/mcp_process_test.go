package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// principalToken makes a principal of a role with the team CLI and
// returns its token.
func principalToken(t *testing.T, d *daemon, dataDir, name string, role protocol.Role) string {
	t.Helper()
	owner := []string{"STUDIO_URL=" + d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR=" + dataDir}
	if out, errOut, code := runStudio(t, owner, "principals", "add", name, "--role", string(role)); code != exitOK {
		t.Fatalf("principals add: %d %s %s", code, out, errOut)
	}
	out, errOut, code := runStudio(t, owner, "tokens", "create", name, "-o", "json")
	if code != exitOK {
		t.Fatalf("tokens create: %d %s", code, errOut)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// structured decodes a tool result's structured content.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return out
}

// TestProcessMCPOverStdio drives `studio mcp` as a subprocess of the built
// binary with the SDK's client over stdio, against a running daemon, with
// an agent principal's STUDIO_TOKEN: the tools with their annotations, a
// read tool, a command tool's pending proposal (the client's elicitation
// "accept" changes nothing), get_proposal pending, a human operator's
// confirm over HTTP, get_proposal succeeded with the result; the command
// ran once.
func TestProcessMCPOverStdio(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	agent := principalToken(t, d, dataDir, "claude", protocol.RoleAgent)
	human := principalToken(t, d, dataDir, "alice", protocol.RoleOperator)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN="+agent, "STUDIO_DATA_DIR="+dataDir)
	cmd.Stderr = os.Stderr
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop-assistant", Version: "1.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	ctx := testCtx(t)
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	if a := byName["list_runs"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Fatalf("list_runs annotations %+v", a)
	}
	if a := byName["delete_schedule"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Fatalf("delete_schedule annotations %+v", a)
	}
	if a := byName["set_schedule_enabled"].Annotations; a == nil || a.DestructiveHint == nil || *a.DestructiveHint || !a.IdempotentHint {
		t.Fatalf("set_schedule_enabled annotations %+v", a)
	}

	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "list_schedules", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(mustMarshal(res.StructuredContent), "nightly-audit") {
		t.Fatalf("list_schedules: %v %+v", err, res)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "set_schedule_enabled", Arguments: map[string]any{"schedule": "nightly-audit", "enabled": true}})
	if err != nil || res.IsError {
		t.Fatalf("set_schedule_enabled: %v %+v", err, res)
	}
	out := structured(t, res)
	pid, _ := out["proposalId"].(string)
	if out["status"] != "pending" || pid == "" {
		t.Fatalf("command tool: %v", out)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0].Mode != "url" || !strings.Contains(asked[0].URL, pid) || !strings.HasPrefix(asked[0].URL, d.URL) {
		t.Fatalf("elicitations %+v", asked)
	}
	mu.Unlock()
	getProposal := func() map[string]any {
		t.Helper()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "get_proposal", Arguments: map[string]any{"proposalId": pid}})
		if err != nil || res.IsError {
			t.Fatalf("get_proposal: %v %+v", err, res)
		}
		return structured(t, res)
	}
	if got := getProposal(); got["status"] != "pending" {
		t.Fatalf("get_proposal: %v", got)
	}
	sc, err := d.client.GetSchedule(ctx, "nightly-audit")
	if err != nil || sc.Enabled {
		t.Fatalf("the schedule changed before a human confirmed: %+v %v", sc, err)
	}

	alice := apiclient.New(d.URL, human, nil)
	st, err := alice.Proposal(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.SubmittedBy != "claude" || !strings.Contains(mustMarshal(st), "desktop-assistant") && st.ConversationID == "" {
		t.Fatalf("proposal %+v", st)
	}
	conv, err := alice.GetConversation(ctx, st.ConversationID, 0, 1)
	if err != nil || conv.Conversation.Title == nil || !strings.Contains(*conv.Conversation.Title, "desktop-assistant") {
		t.Fatalf("the agent's conversation %+v %v: want it titled after the client", conv.Conversation, err)
	}
	r, err := alice.Confirm(ctx, st.ConversationID, pid, protocol.ConfirmProposalRequest{ExpectedCommandHash: st.CommandHash})
	if err != nil || r.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm: %+v %v", r, err)
	}
	got := getProposal()
	if got["status"] != "succeeded" || got["result"] == nil || got["decidedBy"] != "alice" {
		t.Fatalf("get_proposal after the confirm: %v", got)
	}
	if sc, err := d.client.GetSchedule(ctx, "nightly-audit"); err != nil || !sc.Enabled {
		t.Fatalf("the confirmed command did not run: %+v %v", sc, err)
	}
	page, err := d.client.ListAudit(ctx, map[string][]string{"targetId": {pid}})
	if err != nil {
		t.Fatal(err)
	}
	executed := 0
	for _, e := range page.Events {
		if strings.Contains(mustMarshal(e), `"decision":"executed"`) {
			executed++
		}
	}
	if executed != 1 {
		t.Fatalf("%d executed audit rows, want 1: %s", executed, mustMarshal(page))
	}
	// The access log has the calls, as every route's.
	if logs := d.Logs(); !strings.Contains(logs, "route=/mcp") {
		t.Fatalf("no access log line of /mcp:\n%s", logs)
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mcpClients is node and checks/mcp-client-check, where the outside MCP
// clients are installed (npm ci there); without them the test skips,
// unless STUDIO_REQUIRE_MCP_CLIENT=1 (CI) makes it fail.
func mcpClients(t *testing.T, pkg string) (node, dir string) {
	t.Helper()
	dir = filepath.Join("..", "..", "checks", "mcp-client-check")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg)))
	}
	if err != nil {
		if os.Getenv("STUDIO_REQUIRE_MCP_CLIENT") == "1" {
			t.Fatalf("the outside MCP clients cannot run (node, and npm ci in %s): %v", dir, err)
		}
		t.Skipf("SKIP: node or %s/node_modules/%s missing (npm ci there): %v", dir, pkg, err)
	}
	return node, dir
}

// mcpDaemon is a running daemon of the built binary, an agent principal's
// token (name) and the binary, for an outside client's test.
func mcpDaemon(t *testing.T, name string) (d *daemon, dataDir, agent, bin string) {
	t.Helper()
	dataDir = t.TempDir()
	d = startDaemon(t, dataDir)
	agent = principalToken(t, d, dataDir, name, protocol.RoleAgent)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return d, dataDir, agent, bin
}

// jsonLines are the JSON object lines of a check's output.
func jsonLines(out []byte) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestProcessMCPTypeScriptClient: an outside client, the official
// TypeScript SDK (checks/mcp-client-check), against the built binary over
// Streamable HTTP and over stdio (studio mcp): it connects with no error
// event, lists the tools (a viewer's without command tools), calls a read
// and a command tool twice (one proposal), follows it, and gets bad
// arguments back as a typed isError result.
func TestProcessMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, dir := mcpClients(t, "@modelcontextprotocol/sdk")
	d, dataDir, agent, bin := mcpDaemon(t, "ts-agent")
	viewer := principalToken(t, d, dataDir, "ts-viewer", protocol.RoleViewer)
	cmd := exec.CommandContext(testCtx(t), node, "check.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN="+agent, "MCP_CHECK_VIEWER_TOKEN="+viewer, "STUDIO_BIN="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, out)
	}
	lines := jsonLines(out)
	if len(lines) != 2 || lines[0]["transport"] != "http" || lines[1]["transport"] != "stdio" {
		t.Fatalf("check.mjs answered %s", out)
	}
	for _, l := range lines {
		if id, _ := l["proposalId"].(string); id == "" || l["errorEvents"] != float64(0) {
			t.Fatalf("over %v: %s", l["transport"], out)
		}
	}
	t.Logf("TypeScript SDK client: %s", out)
}

// TestProcessMCPInspector: the MCP Inspector's CLI (the official
// debugging client) lists and calls Studio's tools on the built binary,
// over Streamable HTTP with a bearer header and over stdio through
// studio mcp.
func TestProcessMCPInspector(t *testing.T) {
	t.Parallel()
	node, dir := mcpClients(t, "@modelcontextprotocol/inspector")
	d, _, agent, bin := mcpDaemon(t, "inspector")
	inspector := filepath.Join("node_modules", ".bin", "mcp-inspector")
	transports := map[string][]string{
		"http":  {"--cli", d.URL + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + agent},
		"stdio": {"--cli", "-e", "STUDIO_URL=" + d.URL, "-e", "STUDIO_TOKEN=" + agent, bin, "mcp"},
	}
	for _, name := range []string{"http", "stdio"} {
		run := func(args ...string) map[string]any {
			t.Helper()
			cmd := exec.CommandContext(testCtx(t), node, append(append([]string{inspector}, transports[name]...), args...)...)
			cmd.Dir = dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var m map[string]any
			if err != nil || json.Unmarshal(out, &m) != nil {
				t.Fatalf("inspector over %s %v: %v\n%s\n%s", name, args, err, out, stderr.String())
			}
			return m
		}
		tools, _ := run("--method", "tools/list")["tools"].([]any)
		if len(tools) < 20 || !strings.Contains(mustMarshal(tools), `"name":"get_proposal"`) {
			t.Fatalf("inspector over %s: tools/list %s", name, mustMarshal(tools))
		}
		read := run("--method", "tools/call", "--tool-name", "list_schedules")
		if read["isError"] == true || !strings.Contains(mustMarshal(read), "nightly-audit") {
			t.Fatalf("inspector over %s: list_schedules %s", name, mustMarshal(read))
		}
		cmd := run("--method", "tools/call", "--tool-name", "set_schedule_enabled", "--tool-arg", "schedule=nightly-audit", "--tool-arg", "enabled=true")
		sc, _ := cmd["structuredContent"].(map[string]any)
		if cmd["isError"] == true || sc["status"] != "pending" {
			t.Fatalf("inspector over %s: set_schedule_enabled %s", name, mustMarshal(cmd))
		}
		t.Logf("Inspector CLI over %s: %d tools, list_schedules ok, set_schedule_enabled pending %v", name, len(tools), sc["proposalId"])
	}
	if sc, err := d.client.GetSchedule(testCtx(t), "nightly-audit"); err != nil || sc.Enabled {
		t.Fatalf("the schedule changed without a human: %+v %v", sc, err)
	}
}

// TestProcessMCPConformance: the official MCP conformance suite's server
// scenarios that need no reference fixtures (initialize, ping,
// tools/list, DNS-rebinding protection) pass against the built binary.
// (Its other scenarios call the reference server's own tools, resources
// and prompts, which Studio does not have.)
func TestProcessMCPConformance(t *testing.T) {
	t.Parallel()
	node, dir := mcpClients(t, "@modelcontextprotocol/conformance")
	d, _, agent, _ := mcpDaemon(t, "conformance")
	cmd := exec.CommandContext(testCtx(t), node, "conformance.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN="+agent)
	out, err := cmd.CombinedOutput()
	lines := jsonLines(out)
	if err != nil || len(lines) != 4 {
		t.Fatalf("node conformance.mjs: %v\n%s", err, out)
	}
	t.Logf("conformance suite: %s", out)
}

// TestProcessMCPNeedsItsToken: `studio mcp` without STUDIO_TOKEN refuses
// to start and says how to make an agent token — though the data
// directory holds the owner's token and a daemon answers: one missed
// variable must never give an assistant the admin identity.
func TestProcessMCPNeedsItsToken(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), bin, "mcp")
	cmd.Env = append(os.Environ(), "STUDIO_URL="+d.URL, "STUDIO_TOKEN=", "STUDIO_DATA_DIR="+dataDir)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitUsage || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "studio tokens create") || !strings.Contains(stderr.String(), "--role agent") {
		t.Fatalf("studio mcp without STUDIO_TOKEN: %v, stdout %q, stderr %q; want exit %d saying how to make an agent token", err, stdout.String(), stderr.String(), exitUsage)
	}
}

// TestProcessMCPWithoutDaemon: `studio mcp` with no daemon answering
// exits 5 and says so.
func TestProcessMCPWithoutDaemon(t *testing.T) {
	t.Parallel()
	_, errOut, code := runStudio(t, []string{"STUDIO_URL=http://127.0.0.1:1", "STUDIO_TOKEN=stu_x"}, "mcp")
	if code != exitUnreachable || !strings.Contains(errOut, "studio serve") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestProcessMCPConfigSnippets: every client configuration docs/mcp.md
// prints works as written — filled in with a daemon's URL, an agent token
// and the built binary, connected as that client connects (Streamable
// HTTP with the headers; a stdio command with its environment, mcp-remote
// included), it lists the tools and calls one.
func TestProcessMCPConfigSnippets(t *testing.T) {
	t.Parallel()
	node, dir := mcpClients(t, "mcp-remote")
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	snippets := regexp.MustCompile("(?s)<!-- mcp-snippet: ([a-z-]+) -->\n```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(snippets) < 4 {
		t.Fatalf("docs/mcp.md has %d tested snippets, want VS Code, Cursor, Claude Desktop and mcp-remote", len(snippets))
	}
	d, _, token, bin := mcpDaemon(t, "snippets")
	fill := strings.NewReplacer("http://127.0.0.1:8765", d.URL, "stu_YOUR_AGENT_TOKEN", token, "${input:studio-token}", token)
	for _, sn := range snippets {
		name := sn[1]
		var cfg struct {
			Servers    map[string]serverConfig `json:"servers"`    // VS Code
			MCPServers map[string]serverConfig `json:"mcpServers"` // Cursor, Claude Desktop
		}
		if err := json.Unmarshal([]byte(fill.Replace(sn[2])), &cfg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sc, ok := cfg.Servers["studio"]
		if !ok {
			sc, ok = cfg.MCPServers["studio"]
		}
		if !ok {
			t.Fatalf("%s: no studio server in %s", name, sn[2])
		}
		var transport mcp.Transport
		switch {
		case sc.URL != "":
			if name == "vscode" && sc.Type != "http" {
				t.Fatalf("%s: type %q, want http", name, sc.Type)
			}
			transport = &mcp.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: &http.Client{Transport: headerTransport(sc.Headers)}}
		case sc.Command != "":
			if !filepath.IsAbs(sc.Command) && sc.Command != "npx" {
				t.Fatalf("%s: command %q is not an absolute path", name, sc.Command)
			}
			command, args := sc.Command, sc.Args
			if command == "npx" { // the bridge, as installed in checks/mcp-client-check
				if len(args) < 2 || args[0] != "-y" || !strings.HasPrefix(args[1], "mcp-remote@") {
					t.Fatalf("%s: npx args %v", name, args)
				}
				command, args = node, append([]string{filepath.Join(dir, "node_modules", "mcp-remote", "dist", "proxy.js")}, args[2:]...)
			} else {
				command = bin
			}
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), "STUDIO_TOKEN=", "STUDIO_DATA_DIR="+t.TempDir(), "HOME="+t.TempDir())
			for k, v := range sc.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			transport = &mcp.CommandTransport{Command: cmd}
		default:
			t.Fatalf("%s: neither url nor command", name)
		}
		ctx := testCtx(t)
		s, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, transport, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", name, err)
		}
		tools, err := s.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) < 20 {
			t.Fatalf("%s: tools/list: %v %v", name, err, tools)
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "list_schedules", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.Contains(mustMarshal(res.StructuredContent), "nightly-audit") {
			t.Fatalf("%s: list_schedules: %v %+v", name, err, res)
		}
		_ = s.Close()
		t.Logf("%s: %d tools, list_schedules answered", name, len(tools.Tools))
	}
}

// serverConfig is one server of an MCP client's configuration file.
type serverConfig struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// headerTransport adds a configuration's headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
