package httpapi

import (
	"net/http"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// POST /api/admin/policy/explain: what the daemon's policies decide for a
// principal, an action and a resource, and the policies that decided it
// (`studio policy explain`). It resolves the principal and the resource
// exactly as the doors do, then asks the same engine; it records nothing
// and changes nothing.

func (s *Server) policyRoutes() {
	s.mux.HandleFunc("POST /api/admin/policy/explain", s.authed(s.handleExplain))
}

func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request) {
	var req policy.ExplainRequest
	if err := decodeBody(w, r, maxAppBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	x, err := s.explain(r, req)
	answer(w, r, s, x, err)
}

func (s *Server) explain(r *http.Request, req policy.ExplainRequest) (policy.Explanation, error) {
	ctx := r.Context()
	who, err := s.explainedPrincipal(r, req)
	if err != nil {
		return policy.Explanation{}, err
	}
	door := req.Door
	switch door {
	case "":
		door = policy.DoorHTTP
	case policy.DoorHTTP, policy.DoorMCP:
	default:
		return policy.Explanation{}, protocol.Errorf(protocol.Validation, "door must be http or mcp").With("field", "door")
	}
	var res policy.Resource = policy.Studio{}
	switch {
	case req.Conversation != "":
		if res, err = s.cfg.Conversations.PolicyResource(ctx, req.Conversation); err != nil {
			return policy.Explanation{}, err
		}
	case req.Proposal != "":
		if res, err = s.cfg.Proposals.ProposalResource(ctx, "", req.Proposal); err != nil {
			return policy.Explanation{}, err
		}
	case req.Command != nil:
		if s.cfg.App == nil {
			return policy.Explanation{}, protocol.Errorf(protocol.NotFound, "this daemon serves no application commands")
		}
		body := req.Command.Body
		if len(body) == 0 {
			body = []byte(`{}`)
		}
		cmd, err := studio.DecodeCommand(req.Command.Type, body)
		if err != nil {
			return policy.Explanation{}, err
		}
		if req.Action == policy.Propose { // as an MCP command tool asks it
			sp := studio.SpecOf(cmd)
			res = policy.ProposeResource(sp.Type, sp.Risk, string(studio.ImpactOf(cmd)), who.Name)
			break
		}
		facts, err := s.cfg.App.FactsOf(ctx, cmd)
		if err != nil {
			return policy.Explanation{}, err
		}
		res = commandResource(facts, who.Name)
	}
	if err := policy.CheckAction(req.Action, res.Kind()); err != nil {
		return policy.Explanation{}, err
	}
	return s.gate.Engine().Explain(who, req.Action, res, policy.Context{Door: door}), nil
}

// explainedPrincipal is the request's principal: given whole, or a
// stored one by name.
func (s *Server) explainedPrincipal(r *http.Request, req policy.ExplainRequest) (protocol.Principal, error) {
	switch {
	case req.As != nil:
		if !req.As.Role.Valid() {
			return protocol.Principal{}, protocol.Errorf(protocol.Validation, "as.role must be one of %v", protocol.Roles).With("field", "as.role")
		}
		return *req.As, nil
	case req.Principal == "":
		return protocol.Principal{}, protocol.Errorf(protocol.Validation, "principal (a name) or as (a principal) is required").With("field", "principal")
	case s.cfg.Principals == nil:
		if req.Principal != OwnerName {
			return protocol.Principal{}, protocol.Errorf(protocol.NotFound, "principal %s not found", req.Principal)
		}
		return legacyOwner, nil
	}
	p, err := s.cfg.Principals.GetPrincipal(r.Context(), req.Principal)
	if err == nil && p.Name != req.Principal {
		err = protocol.Errorf(protocol.NotFound, "principal %s not found", req.Principal)
	}
	return p.Wire(), err
}
