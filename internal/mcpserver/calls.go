package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/tools"
)

// readTool runs a read tool of the registry, its result redacted and
// bounded as in the operator's frames.
func (s *Server) readTool(spec tools.Spec) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out, err := spec.Run(ctx, tools.Env{}, arguments(req))
		if err != nil {
			return failed(err), nil
		}
		return success(out.Result), nil
	}
}

// Pending is a command tool's answer: the proposal waits for a human.
type Pending struct {
	Status         string                    `json:"status"` // pending (or its state when no longer pending)
	ProposalID     string                    `json:"proposalId"`
	Summary        string                    `json:"summary"`
	CommandType    string                    `json:"commandType"`
	Risk           string                    `json:"risk"`
	Impact         string                    `json:"impact,omitempty"`
	Target         *protocol.ResourceVersion `json:"target,omitempty"`
	TargetName     string                    `json:"targetName,omitempty"`
	ExpiresAt      string                    `json:"expiresAt"`
	CommandHash    string                    `json:"commandHash"`
	ConversationID string                    `json:"conversationId"`
	CockpitURL     string                    `json:"cockpitUrl"`
	// ConfirmRole is the least role the daemon's policy lets confirm it
	// ("" when none would).
	ConfirmRole protocol.Role  `json:"confirmRole,omitempty"`
	SubmittedBy string         `json:"submittedBy,omitempty"`
	DecidedBy   string         `json:"decidedBy,omitempty"`
	Result      jsontext.Value `json:"result,omitempty"`
	ErrorCode   string         `json:"errorCode,omitempty"`
	// Existing says an identical proposal was pending already: this call
	// made none.
	Existing bool   `json:"existing,omitempty"`
	Note     string `json:"note"`
}

// commandTool makes a command a proposal of the caller's conversation for
// its client. A client of protocol 2026-07-28 that can open URLs is asked
// (a URL-mode elicitation, multi round-trip) to open a new proposal's
// card — once: not again for a resend that finds it pending (existing);
// whatever it answers, the retried call only reports the proposal, and
// only a proposal of this command and this client.
func (s *Server) commandTool(spec tools.Spec) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := principal(ctx)
		if err != nil {
			return failed(err), nil
		}
		client := clientName(req)
		conv, err := s.cfg.Coordinator.AgentConversation(ctx, p, client)
		if err != nil {
			return failed(err), nil
		}
		if state := req.Params.RequestState; state != "" {
			// The retry after the elicitation: its answer is ignored on
			// purpose — it is the client's, never a human's consent.
			return s.retried(ctx, spec, conv.ID, state), nil
		}
		ap, err := s.cfg.Coordinator.ProposeForAgent(ctx, coordinator.AgentCommand{ConversationID: conv.ID, Tool: spec.ID,
			Arguments: jsontext.Value(arguments(req)), Client: client})
		if err != nil {
			return failed(err), nil
		}
		v := s.view(ctx, ap.Proposal, ap.Existing)
		if canOpenURL(req) && !ap.Existing && v.Status == "pending" {
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"open_proposal": openProposal(v)},
				RequestState:  v.ProposalID,
			}, nil
		}
		return success(v), nil
	}
}

// retried reports the proposal a retried call's requestState names, when
// it is this command's, in this client's conversation: never another
// proposal the caller happens to see.
func (s *Server) retried(ctx context.Context, spec tools.Spec, convID, state string) *mcp.CallToolResult {
	mismatch := protocol.Errorf(protocol.Validation, "requestState does not name a proposal of this %s call; call the tool again without it", spec.ID).
		With("field", "requestState")
	if _, err := uuid.Parse(state); err != nil {
		return failed(mismatch)
	}
	st, err := s.cfg.Coordinator.FindProposal(ctx, state)
	if protocol.IsCode(err, protocol.NotFound) || err == nil && (st.CommandType != spec.ID || st.ConversationID != convID) {
		return failed(mismatch)
	}
	if err != nil {
		return failed(err)
	}
	return success(s.view(ctx, st, false))
}

// openProposal asks a client to open a pending proposal's card.
func openProposal(v Pending) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "url", URL: v.CockpitURL, ElicitationID: v.ProposalID,
		Message: fmt.Sprintf("Studio proposal %s waits for a human with the %s role: %s. Open it in the cockpit to review it; only a confirmation there runs it.",
			short(v.ProposalID), v.ConfirmRole, v.Summary)}
}

// canOpenURL reports whether the client takes URL-mode elicitation as an
// input request of the call (protocol 2026-07-28: multi round-trip).
func canOpenURL(req *mcp.CallToolRequest) bool {
	if req.ProtocolVersion() < "2026-07-28" {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// getProposal reports a proposal's state and, once executed, its result.
func (s *Server) getProposal(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		ProposalID string `json:"proposalId"`
	}
	if err := protocol.Unmarshal(arguments(req), &in); err != nil {
		return failed(err), nil
	}
	if _, err := uuid.Parse(in.ProposalID); err != nil {
		return failed(protocol.Errorf(protocol.Validation, "proposalId must be a proposal's id").With("field", "proposalId")), nil
	}
	st, err := s.cfg.Coordinator.FindProposal(ctx, in.ProposalID)
	if err != nil {
		return failed(err), nil
	}
	return success(s.view(ctx, st, false)), nil
}

// view is a proposal as a client sees it. A pending proposal past its
// expiry reports expired: it can no longer be confirmed, whether or not
// the sweeper closed it yet.
func (s *Server) view(ctx context.Context, st protocol.ProposalState, existing bool) Pending {
	v := Pending{Status: st.Status, ProposalID: st.ID, Summary: st.Summary, CommandType: st.CommandType, Risk: st.Risk, Impact: st.Impact,
		Target: st.Target, TargetName: st.TargetName, ExpiresAt: stampTime(st.ExpiresAt).UTC().Format(time.RFC3339Nano),
		CommandHash: st.CommandHash, ConversationID: st.ConversationID, CockpitURL: cockpitURL(ctx, st.ConversationID, st.ID),
		SubmittedBy: st.SubmittedBy, DecidedBy: st.DecidedBy, Existing: existing,
		ConfirmRole: policy.GateFrom(ctx).Engine().LeastRole(policy.Confirm, policy.ProposeResource(st.CommandType, st.Risk, st.Impact, st.SubmittedBy))}
	if st.ErrorCode != nil {
		v.ErrorCode = *st.ErrorCode
	}
	if len(st.Result) > 0 {
		v.Result = jsontext.Value(bounded(redact.JSON(st.Result)))
	}
	if v.Status == "pending" && !s.cfg.Now().Before(stampTime(st.ExpiresAt)) {
		v.Status = "expired"
	}
	switch v.Status {
	case "pending":
		v.Note = fmt.Sprintf("Not executed. A human with the %s role must confirm it in Studio (cockpit, or `studio operator confirm %s`); "+
			"follow it with get_proposal at most every %s, until expiresAt.", v.ConfirmRole, short(st.ID), pollHint)
	case "executing":
		v.Note = "Confirmed by a human; executing."
	case "succeeded":
		v.Note = "Confirmed by a human and executed; result holds what the command returned."
	case "expired":
		v.Note = "Nobody confirmed it in time; nothing was changed."
	case "cancelled":
		v.Note = "Declined, or its turn ended; nothing was changed."
	default:
		v.Note = "Nothing more will happen to this proposal."
	}
	return v
}

// stampTime is a wire timestamp (seconds since the epoch) as a time.
func stampTime(sec float64) time.Time { return time.UnixMilli(int64(sec * 1000)) }

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

type baseKey struct{}

// WithBase carries the daemon's URL as the client reached it (the cockpit
// URLs of proposals point there).
func WithBase(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, baseKey{}, base)
}

// cockpitURL is where the proposal's card is: the cockpit with the
// agent's conversation open in the dock (the link webhook messages
// give too).
func cockpitURL(ctx context.Context, convID, proposalID string) string {
	base, _ := ctx.Value(baseKey{}).(string)
	q := url.Values{"conversation": {convID}, "proposal": {proposalID}}
	return base + "/#" + q.Encode()
}

// arguments is the call's arguments, {} when absent.
func arguments(req *mcp.CallToolRequest) []byte {
	if req.Params == nil || len(req.Params.Arguments) == 0 || string(req.Params.Arguments) == "null" {
		return []byte(`{}`)
	}
	return req.Params.Arguments
}

// success is a result as text and structured content, redacted and
// bounded.
func success(v any) *mcp.CallToolResult {
	b, err := protocol.Marshal(v)
	if err != nil {
		return failed(err)
	}
	b = bounded(redact.JSON(b))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// failed is a typed error as the tool's result: {"error": ProtocolError},
// its message redacted, so that the model sees why.
func failed(err error) *mcp.CallToolResult {
	pe := *protocol.ErrorOf(err)
	pe.Message = redact.Text(pe.Message)
	b, _ := protocol.Marshal(protocol.ErrorBody{Error: &pe})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// bounded keeps a result within MaxResultBytes, saying so when cut.
func bounded(b []byte) []byte {
	if len(b) <= MaxResultBytes {
		return b
	}
	preview := string(b[:MaxResultBytes/2])
	for !utf8.ValidString(preview) {
		preview = preview[:len(preview)-1]
	}
	out, _ := protocol.Marshal(map[string]any{"truncated": true, "bytes": len(b), "preview": preview,
		"note": fmt.Sprintf("the result was %d bytes; ask for less (filters, a smaller limit)", len(b))})
	return out
}
