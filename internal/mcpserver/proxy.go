package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/protocol"
)

// Proxy serves a daemon's /mcp tools over another transport (stdio, for a
// desktop assistant that launches `studio mcp`): every call goes to the
// daemon, as the token's principal, so the daemon's rules hold unchanged —
// its decisions and errors reach the local client as they are. The daemon
// sees the local client's name (its agent conversation is named after it),
// or, when the local client gives none, this proxy's own id.
type Proxy struct {
	endpoint string
	client   *http.Client
	version  string
	id       string // "studio mcp <random>": this proxy's client name when the local client gives none

	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession // by the local client's name

	// asks are the elicitations sent without waiting (clients before
	// 2026-07-28); Close ends them.
	asks     sync.WaitGroup
	askCtx   context.Context
	stopAsks context.CancelFunc
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
	askCtx, stop := context.WithCancel(context.Background())
	return &Proxy{endpoint: daemonURL + "/mcp", version: version, sessions: map[string]*mcp.ClientSession{},
		id:     "studio mcp " + uuid.NewString()[:8],
		client: &http.Client{Transport: BearerTransport{Token: token}}, askCtx: askCtx, stopAsks: stop}
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

// Close ends the sessions with the daemon and the elicitations in flight.
func (p *Proxy) Close() {
	p.stopAsks()
	p.asks.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sessions {
		_ = s.Close()
	}
	p.sessions = map[string]*mcp.ClientSession{}
}

// Server lists the daemon's tools (those the token's principal may call)
// and serves them, each call forwarded.
func (p *Proxy) Server(ctx context.Context) (*mcp.Server, error) {
	up, err := p.upstream(ctx, p.id)
	if err != nil {
		return nil, err
	}
	srv := newMCPServer(p.version, nil)
	srv.AddReceivingMiddleware(servedOnly)
	for t, err := range up.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the daemon's tools: %w", err)
		}
		srv.AddTool(t, p.forward(t.Name))
	}
	return srv, nil
}

// forward calls the daemon's tool. A command's new pending proposal is
// shown to a local client that opens URLs (URL-mode elicitation: an
// input request at protocol 2026-07-28; before it, a request of the
// session that the call does not wait for); not again for get_proposal
// or a resend that found it pending. Its answer is ignored — it is never
// consent. A retry with requestState goes to the same tool, whose daemon
// reports only the proposal of that command and client.
func (p *Proxy) forward(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		client := p.id
		if ci := req.ClientInfo(); ci != nil && strings.TrimSpace(ci.Name) != "" {
			client = ci.Name
		}
		up, err := p.upstream(ctx, client)
		if err != nil {
			return failed(protocol.Errorf(protocol.ServiceFailure, "%v", err)), nil
		}
		state := req.Params.RequestState
		res, err := up.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(arguments(req)), RequestState: state})
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return nil, rpcErr // the daemon's answer (an unknown tool, bad params), as it gave it
			}
			return failed(protocol.Errorf(protocol.ServiceFailure, "the daemon did not answer the call: %v", err)), nil
		}
		if state != "" || name == GetProposalTool {
			return res, nil
		}
		pending, ok := pendingOf(res)
		if !ok || pending.Existing || !wantsURL(req) {
			return res, nil
		}
		ask := openProposal(pending)
		if req.ProtocolVersion() >= "2026-07-28" {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"open_proposal": ask}, RequestState: pending.ProposalID}, nil
		}
		p.askLater(req.Session, ask)
		return res, nil
	}
}

// askLater sends an elicitation without holding the call: whatever and
// whenever the client answers, the proposal stays as it is.
func (p *Proxy) askLater(session *mcp.ServerSession, ask *mcp.ElicitParams) {
	if session == nil {
		return
	}
	p.asks.Add(1)
	go func() {
		defer p.asks.Done()
		ctx, cancel := context.WithTimeout(p.askCtx, askTimeout)
		defer cancel()
		_, _ = session.Elicit(ctx, ask)
	}()
}

// askTimeout bounds how long an unanswered elicitation is waited for.
const askTimeout = 10 * time.Minute

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
