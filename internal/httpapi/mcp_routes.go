package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// The MCP endpoint (internal/mcpserver) behind the daemon's edge: the same
// Host allow-list, header and body limits and access log as the API, the
// principals' bearer tokens (never in the query), a refused foreign Origin,
// and 405 with Allow for every method but POST (a stateless server has no
// stream to GET and no session to DELETE).
//
// Studio does not take part in MCP's OAuth authorization (optional in the
// MCP specification): its tokens are the principals' personal tokens
// (studio tokens create), no authorization server issues them. So a
// refused credential's 401 names no protected-resource metadata, and the
// well-known addresses an OAuth client probes answer 404 with what to do
// instead: send the token in the Authorization header.

// ResourceMetadataPath is where RFC 9728 clients look for the
// protected-resource metadata of /mcp (and ResourceMetadataPath + "/mcp",
// its path-suffixed form); Studio serves none there.
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// oauthDiscoveryPaths are the addresses an OAuth client of the MCP
// authorization spec probes; each answers noOAuth.
var oauthDiscoveryPaths = []string{ResourceMetadataPath, ResourceMetadataPath + "/mcp",
	"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}

// BearerHint says how an MCP client authenticates; the 401 of /mcp and
// the OAuth discovery addresses say it.
const BearerHint = "Studio's MCP endpoint takes a principal's bearer token, not OAuth: create one with " +
	"`studio principals add NAME --role agent` and `studio tokens create NAME`, then send it as the header " +
	"`Authorization: Bearer stu_…` (see docs/mcp.md)"

func (s *Server) mcpRoutes() {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, protocol.Errorf(protocol.NotFound, "this daemon serves no MCP endpoint"))
	}))
	if s.cfg.MCP != nil {
		h = s.cfg.MCP(s.writeError)
	}
	m := s.mux
	m.Handle("POST /mcp", s.mcpAuthed(h))
	m.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, protocol.ErrorBody{Error: protocol.Errorf(protocol.Validation,
			"the MCP endpoint takes POST only: Streamable HTTP, stateless (no stream to GET, no session to DELETE)").With("reason", "method_not_allowed")})
	})
	for _, p := range oauthDiscoveryPaths {
		m.HandleFunc("GET "+p, s.handleNoOAuth)
	}
}

// mcpAuthed is authed for /mcp: a foreign Origin is refused before
// anything else (a page on another site must not drive the tools with a
// token it got hold of), and a refused credential's 401 says how to get
// and send a token.
func (s *Server) mcpAuthed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r) {
			s.writeError(w, r, protocol.Errorf(protocol.Denied, "requests from another origin are refused").With("reason", "origin"))
			return
		}
		p, _, err := s.authenticate(r)
		if err != nil {
			if pe := protocol.ErrorOf(err); pe.Code == protocol.AuthRequired {
				w.Header().Set("WWW-Authenticate", `Bearer realm="studio"`)
				err = protocol.Errorf(protocol.AuthRequired, "%s. %s", pe.Message, BearerHint).With("reason", "bearer_token_required")
			}
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(s.withPolicy(r.Context(), p))
		if err := s.authorize(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether an Origin header names the daemon as the
// request reached it.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

// handleNoOAuth answers an OAuth client's discovery: 404, no metadata,
// and how to authenticate instead. Like /healthz it is open.
func (s *Server) handleNoOAuth(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, protocol.Errorf(protocol.NotFound, "%s", BearerHint).With("reason", "no_oauth"))
}

// aguiRoutes mounts the AG-UI door (internal/agui), authenticated like
// every /api route; a daemon without it answers not_found.
func (s *Server) aguiRoutes() {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, protocol.Errorf(protocol.NotFound, "this daemon serves no AG-UI endpoint"))
	}))
	if s.cfg.AGUI != nil {
		h = s.cfg.AGUI(DoorSupport{Refuse: s.writeError, AccessSignal: s.cfg.Streams.AccessSignal,
			StillAllowed: func(ctx context.Context, convID string, action policy.Action) error {
				return s.stillAllowed(ctx, credentialFrom(ctx), policy.ContextFrom(ctx), convID, action)
			}})
	}
	s.mux.HandleFunc("POST /api/agui", s.authed(h.ServeHTTP))
}
