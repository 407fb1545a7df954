package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/protocol"
)

// Proxy serves a daemon's /mcp tools over another transport (stdio, for a
// desktop assistant that launches `studio mcp`): every call goes to the
// daemon, as the token's principal, so the daemon's rules hold unchanged.
// The daemon sees the local client's name (its agent conversation is named
// after it).
type Proxy struct {
	endpoint string
	client   *http.Client
	version  string

	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession // by the local client's name
}

// BearerTransport adds a principal's token to every request.
type BearerTransport struct {
	Token string
	Next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// NewProxy is a proxy of the daemon's MCP endpoint (its URL + "/mcp")
// with a principal's token.
func NewProxy(daemonURL, token, version string) *Proxy {
	return &Proxy{endpoint: daemonURL + "/mcp", version: version, sessions: map[string]*mcp.ClientSession{},
		client: &http.Client{Transport: BearerTransport{Token: token}}}
}

// upstream is the session with the daemon for a local client.
func (p *Proxy) upstream(ctx context.Context, client string) (*mcp.ClientSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[client]; s != nil {
		return s, nil
	}
	c := mcp.NewClient(&mcp.Implementation{Name: client, Version: p.version}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.endpoint, HTTPClient: p.client, MaxRetries: 1}, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the daemon's MCP endpoint at %s: %w", p.endpoint, err)
	}
	p.sessions[client] = s
	return s, nil
}

// Close ends the sessions with the daemon.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sessions {
		_ = s.Close()
	}
	p.sessions = map[string]*mcp.ClientSession{}
}

// Server lists the daemon's tools and serves them, each call forwarded.
func (p *Proxy) Server(ctx context.Context) (*mcp.Server, error) {
	up, err := p.upstream(ctx, "studio mcp")
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "studio", Title: "Studio", Version: p.version}, &mcp.ServerOptions{Instructions: instructions})
	for t, err := range up.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the daemon's tools: %w", err)
		}
		srv.AddTool(t, p.forward(t.Name))
	}
	return srv, nil
}

// forward calls the daemon's tool. A command's pending proposal is shown
// to a local client that opens URLs (URL-mode elicitation: an input
// request at protocol 2026-07-28, a request of the session before it);
// its answer is ignored — it is never consent.
func (p *Proxy) forward(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		client := "mcp client"
		if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
			client = ci.Name
		}
		up, err := p.upstream(ctx, client)
		if err != nil {
			return failed(protocol.Errorf(protocol.ServiceFailure, "%v", err)), nil
		}
		params := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(arguments(req))}
		if state := req.Params.RequestState; state != "" { // the retry after the elicitation
			params = &mcp.CallToolParams{Name: GetProposalTool, Arguments: map[string]any{"proposalId": state}}
		}
		res, err := up.CallTool(ctx, params)
		if err != nil {
			return failed(protocol.Errorf(protocol.ServiceFailure, "the daemon refused the call: %v", err)), nil
		}
		if req.Params.RequestState != "" {
			return res, nil
		}
		pending, ok := pendingOf(res)
		if !ok || !wantsURL(req) {
			return res, nil
		}
		ask := &mcp.ElicitParams{Mode: "url", URL: pending.CockpitURL, ElicitationID: pending.ProposalID,
			Message: fmt.Sprintf("Studio proposal %s waits for a human with the %s role: %s. Open it in the cockpit to review it; only a confirmation there runs it.",
				short(pending.ProposalID), pending.ConfirmRole, pending.Summary)}
		if req.ProtocolVersion() >= "2026-07-28" {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"open_proposal": ask}, RequestState: pending.ProposalID}, nil
		}
		_, _ = req.Session.Elicit(ctx, ask) // whatever the answer: the proposal stays as it is
		return res, nil
	}
}

// wantsURL reports whether the local client takes URL-mode elicitation.
func wantsURL(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// pendingOf reads a command tool's pending answer.
func pendingOf(res *mcp.CallToolResult) (Pending, bool) {
	if res == nil || res.IsError || res.StructuredContent == nil {
		return Pending{}, false
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return Pending{}, false
	}
	var p Pending
	if json.Unmarshal(b, &p) != nil || p.Status != "pending" || p.ProposalID == "" || p.CockpitURL == "" {
		return Pending{}, false
	}
	return p, true
}
