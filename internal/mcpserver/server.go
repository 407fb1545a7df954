// Package mcpserver offers Studio's typed tools to outside agents over the
// Model Context Protocol, under the operator's rules: the tools are the
// operator's registry (internal/tools), read tools run, and every
// application command becomes a proposal through the coordinator that a
// human with the role confirms in the cockpit or the CLI. Nothing a client
// sends — arguments, an elicitation's answer — ever counts as consent.
// The HTTP handler is stateless Streamable HTTP, so any daemon sharing a
// PostgreSQL database answers any request; authentication, the Host
// allow-list and the Origin check are the httpapi edge's.
package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
)

// Defaults of Config fields left zero.
const (
	// DefaultCallsPerMinute is each principal's tool calls per minute.
	DefaultCallsPerMinute = 60
	// DefaultCallBurst is how many calls a principal may make at once.
	DefaultCallBurst = 20
	// MaxBody bounds one JSON-RPC message from a client.
	MaxBody = 1 << 20
	// MaxResultBytes bounds a tool's result (as the operator's frames).
	MaxResultBytes = 32 << 10
)

// Config wires a Server.
type Config struct {
	Coordinator *coordinator.Coordinator
	// Tools is the operator's registry; its read and command tools are
	// offered, its cockpit (navigate, draft) tools are not: no browser
	// acknowledges their effects here.
	Tools   *tools.Registry
	Version string
	Logger  *slog.Logger
	// Metrics records the calls by tool and outcome (nil: none).
	Metrics *metrics.Registry
	// CallsPerMinute and CallBurst are each principal's rate limit.
	CallsPerMinute int
	CallBurst      int
	Now            func() time.Time
}

// Server is the MCP server over the operator's tools.
type Server struct {
	cfg     Config
	mcp     *mcp.Server
	handler http.Handler
	offered map[string]Offered // the offered tools, by name
	limit   *limiter
}

// PolicyActionMeta is the key of a tool's _meta naming the policy action
// its calls ask (docs/teams.md).
const PolicyActionMeta = "studio/policyAction"

// GetProposalTool is the read tool that reports a proposal's state.
const GetProposalTool = "get_proposal"

// New builds the server and its tools.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CallsPerMinute <= 0 {
		cfg.CallsPerMinute = DefaultCallsPerMinute
	}
	if cfg.CallBurst <= 0 {
		cfg.CallBurst = DefaultCallBurst
	}
	s := &Server{cfg: cfg, offered: map[string]Offered{},
		limit: newLimiter(float64(cfg.CallsPerMinute)/60, float64(cfg.CallBurst), cfg.Now)}
	s.mcp = newMCPServer(cfg.Version, cfg.Logger)
	for _, t := range s.Tools() {
		s.mcp.AddTool(t.Tool, s.observed(t.Tool.Name, t.handler))
		s.offered[t.Tool.Name] = t
	}
	s.mcp.AddReceivingMiddleware(servedOnly, s.decided)
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: cfg.Logger,
			// The edge checks Host and Origin for every listener alike.
			DisableLocalhostProtection: true})
	return s
}

const instructions = "Studio's tools: Studio is an AI operator's cockpit with its own playbooks, workflows, runs and schedules " +
	"(not a CI system's). Read tools answer at once. A command tool never changes anything by itself: " +
	"it creates a proposal that a human must confirm in the Studio cockpit (or `studio operator confirm`); " +
	"the call answers with the pending proposal and its cockpit URL. Follow it with get_proposal, at most every " +
	pollHint + " while it is pending. Nothing you send, and no answer to an elicitation, confirms a proposal."

// pollHint is how often a client should ask get_proposal about a pending
// proposal: a human decides it, which takes minutes, not milliseconds.
const pollHint = "30 seconds"

// newMCPServer is an SDK server that declares exactly what it delivers:
// tools, with no list-change notifications (a stateless server cannot
// send them) and no logging.
func newMCPServer(version string, logger *slog.Logger) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "studio", Title: "Studio", Version: version},
		&mcp.ServerOptions{Instructions: instructions, Logger: logger,
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
}

// runsModel are the command tools whose runs call a model provider: an
// open world beyond Studio's own data.
var runsModel = map[string]bool{"launch_playbook": true, "launch_workflow": true, "retry_run": true}

// Offered is one tool as offered to clients.
type Offered struct {
	Tool *mcp.Tool
	// Action is what a call asks the policy (mayCall): a read, or
	// propose for a command tool.
	Action policy.Action
	Class  tools.Class
	// resource is what the call acts on, for the caller.
	resource func(p protocol.Principal) policy.Resource
	handler  mcp.ToolHandler
}

// readAction is what a read tool asks: health and the audit trail have
// their own actions, the rest reads the cockpit.
func readAction(id string) policy.Action {
	switch id {
	case "system_health":
		return policy.ReadHealth
	case "list_audit_events":
		return policy.ReadAudit
	}
	return policy.ReadStudio
}

func onStudio(protocol.Principal) policy.Resource { return policy.Studio{} }

// Tools lists the offered tools, in the registry's order, then get_proposal.
func (s *Server) Tools() []Offered {
	impacts := map[string]studio.Impact{}
	for _, cs := range studio.Commands() {
		impacts[cs.Type] = cs.Impact
	}
	f, tr := false, true
	var out []Offered
	if s.cfg.Tools != nil {
		for _, spec := range s.cfg.Tools.Specs() {
			t := &mcp.Tool{Name: spec.ID, Title: spec.Title, InputSchema: json.RawMessage(spec.InputSchema)}
			switch {
			case strings.HasPrefix(spec.Operation, "cockpit."):
				// The cockpit's own tools (its view, its navigation and
				// drafts) need a browser: none is behind an agent.
			case spec.Class == tools.ClassRead:
				t.Description = "Studio: " + spec.Description
				t.Annotations = &mcp.ToolAnnotations{Title: spec.Title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}
				out = append(out, Offered{Tool: t, Action: readAction(spec.ID), Class: spec.Class, resource: onStudio, handler: s.readTool(spec)})
			case !spec.Class.RunsInTurn():
				destructive := impacts[spec.ID].Destructive() || spec.Class == tools.ClassAdmin
				t.Description = "Studio: " + strings.TrimSuffix(spec.Description, " Becomes a proposal the operator must confirm.") +
					" " + ConfirmationNote
				open := &f
				if runsModel[spec.ID] {
					open = &tr
				}
				t.Annotations = &mcp.ToolAnnotations{Title: spec.Title, DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: open}
				// Proposing is decided on the command's type, risk and
				// impact: its target is resolved when it is proposed.
				id, risk, impact := spec.ID, string(spec.Class), string(impacts[spec.ID])
				proposal := func(p protocol.Principal) policy.Resource { return policy.ProposeResource(id, risk, impact, p.Name) }
				out = append(out, Offered{Tool: t, Action: policy.Propose, Class: spec.Class, resource: proposal, handler: s.commandTool(spec)})
			}
		}
	}
	gp := &mcp.Tool{Name: GetProposalTool, Title: "Get proposal",
		Description: "Studio: the state of a proposal a command tool made: pending (awaiting a human), executing, succeeded (with the command's result), failed, expired, cancelled (declined) or conflict (its target changed). " +
			"A human decides in the Studio cockpit, which takes minutes: while it is pending ask again at most every " + pollHint + ", and stop at its expiresAt.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"proposalId":{"type":"string","format":"uuid","description":"The proposal's id, as a command tool answered it."}},"required":["proposalId"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{Title: "Get proposal", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}}
	// The proposal itself is decided when it is read (read_proposal).
	out = append(out, Offered{Tool: gp, Action: policy.ReadStudio, Class: tools.ClassRead, resource: onStudio, handler: s.getProposal})
	for _, o := range out {
		// Which action a call asks the policy: a client can explain a
		// refusal before it calls.
		o.Tool.Meta = mcp.Meta{PolicyActionMeta: string(o.Action)}
	}
	return out
}

// ConfirmationNote ends the description of every command tool.
const ConfirmationNote = "Needs a human's confirmation: it only creates a proposal that a person with the role confirms in Studio; nothing changes until then. Answers the pending proposal."

// observed records a call's outcome and latency.
func (s *Server) observed(name string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		res, err := h(ctx, req)
		outcome := "ok"
		switch {
		case err != nil:
			outcome = "error"
		case res != nil && res.IsError:
			outcome = errorCode(res)
		case res != nil && len(res.InputRequests) > 0:
			outcome = "input_required"
		}
		s.cfg.Metrics.MCPToolCall(name, outcome, time.Since(start))
		return res, err
	}
}

// limiter is a token bucket per principal.
type limiter struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate, burst float64, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: burst, now: now, buckets: map[string]*bucket{}}
}

// take spends one token of key's bucket, or says how long until one is
// free.
func (l *limiter) take(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 10000 { // forget idle principals rather than grow
			for k, v := range l.buckets {
				if now.Sub(v.at).Seconds()*l.rate >= l.burst {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

func errorCode(res *mcp.CallToolResult) string {
	var body struct {
		Error *protocol.Error `json:"error"`
	}
	if b, ok := res.StructuredContent.(json.RawMessage); ok && json.Unmarshal(b, &body) == nil && body.Error != nil {
		return string(body.Error.Code)
	}
	return "error"
}

// principal is the caller; the edge authenticated it.
func principal(ctx context.Context) (protocol.Principal, error) {
	p, ok := protocol.PrincipalFrom(ctx)
	if !ok || p.ID == "" {
		return p, protocol.Errorf(protocol.AuthRequired, "a valid bearer token is required")
	}
	return p, nil
}
