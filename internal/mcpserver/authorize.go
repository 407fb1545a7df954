package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// allowed decides whether the caller may call the offered tool: nil, or
// the typed denial. It is the one decision point of this package: every
// tools/call — alone or an element of a batch — and what tools/list shows
// ask it, and it only asks the daemon's policy (internal/policy) the
// tool's action (Offered.Action) on what the call acts on. A call's
// refusal is recorded; leaving a tool out of a list (record false) is no
// refusal.
func (s *Server) allowed(ctx context.Context, p protocol.Principal, tool string, record bool) error {
	o, ok := s.offered[tool]
	if !ok {
		return protocol.Errorf(protocol.NotFound, "Studio offers no tool %q", tool).With("tool", tool)
	}
	if !record {
		if !policy.May(ctx, o.Action, o.resource(p)) {
			return protocol.Errorf(protocol.Denied, "the policy does not let you call %s", tool)
		}
		return nil
	}
	if err := policy.Ask(ctx, o.Action, o.resource(p)); err != nil {
		return protocol.ErrorOf(err).With("tool", tool)
	}
	return nil
}

// decided is the receiving middleware that puts every tools/call through
// allowed and the caller's rate limit before its tool runs, and filters
// tools/list to what the caller may call. It runs per JSON-RPC request, so
// each element of a batch is decided and counted on its own. A refusal is
// the tool's error result (isError, {"error": ProtocolError}), never a
// transport error, so that a model reads why and whether to retry.
func (s *Server) decided(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			if res := s.admit(ctx, call.Params.Name); res != nil {
				return res, nil
			}
		case "tools/list":
			res, err := next(ctx, method, req)
			if list, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				p, _ := principal(ctx)
				kept := list.Tools[:0:0]
				for _, t := range list.Tools {
					if s.allowed(ctx, p, t.Name, false) == nil {
						kept = append(kept, t)
					}
				}
				list.Tools = kept
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// admit is nil when the caller may call the tool now, else the refusal
// as the call's result: no principal, a role or policy denial, or past
// the principal's rate (rate_limited with retryAfterMs). An unknown tool
// is the SDK's to answer.
func (s *Server) admit(ctx context.Context, tool string) *mcp.CallToolResult {
	p, err := principal(ctx)
	if err != nil {
		return failed(err)
	}
	_, known := s.offered[tool]
	if ok, wait := s.limit.take(p.ID); !ok {
		if known {
			s.cfg.Metrics.MCPToolCall(tool, string(protocol.RateLimited), 0)
		}
		return failed(&protocol.Error{Code: protocol.RateLimited, Retryable: true, RetryAfterMs: max(wait.Milliseconds(), 1),
			Message: fmt.Sprintf("too many Studio tool calls from this principal (at most %d a minute); try again after retryAfterMs", s.cfg.CallsPerMinute),
			Details: map[string]any{"limit": "mcp_calls_per_minute", "max": s.cfg.CallsPerMinute}})
	}
	if !known {
		return nil
	}
	if err := s.allowed(ctx, p, tool, true); err != nil {
		s.cfg.Metrics.MCPToolCall(tool, "role_denied", 0)
		return failed(err)
	}
	return nil
}

// servedOnly answers every method this server does not serve — resources,
// prompts, logging, completions, subscriptions: none is declared in its
// capabilities — with JSON-RPC's method not found.
func servedOnly(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !served[method] {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not served: Studio offers tools only", method)}
		}
		return next(ctx, method, req)
	}
}

// served are the methods a Studio MCP server answers.
var served = map[string]bool{
	"initialize": true, "notifications/initialized": true, "server/discover": true, "ping": true,
	"tools/list": true, "tools/call": true, "notifications/cancelled": true, "notifications/progress": true,
	"notifications/roots/list_changed": true, // a client's news nobody here needs: accepted, ignored
}
