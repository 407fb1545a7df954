package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/studio/operator/internal/protocol"
)

// The MCP endpoint (internal/mcpserver) behind the daemon's edge: the same
// Host allow-list, header and body limits and access log as the API, the
// principals' bearer tokens (never in the query), and what the MCP
// authorization spec asks of a resource server — a 401 whose
// WWW-Authenticate points at the protected-resource metadata (RFC 9728),
// served here, and a refused foreign Origin.

// ResourceMetadataPath is the RFC 9728 protected-resource metadata
// document of /mcp; ResourceMetadataPath + "/mcp" serves it too (the
// path-suffixed form of RFC 9728 §3.1).
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

func (s *Server) mcpRoutes() {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, protocol.Errorf(protocol.NotFound, "this daemon serves no MCP endpoint"))
	}))
	if s.cfg.MCP != nil {
		h = s.cfg.MCP(s.writeError)
	}
	m := s.mux
	m.Handle("POST /mcp", s.mcpAuthed(h))
	// Stateless: no server stream to open, so GET /mcp is the mux's 405
	// (as the transport's spec asks of a server without one).
	m.HandleFunc("GET "+ResourceMetadataPath, s.handleResourceMetadata)
	m.HandleFunc("GET "+ResourceMetadataPath+"/mcp", s.handleResourceMetadata)
}

// baseURL is the daemon's URL as the request reached it (its Host passed
// the allow-list).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// mcpAuthed is authed for /mcp: a foreign Origin is refused before
// anything else (a page on another site must not drive the tools with a
// token it got hold of), and a refused credential's 401 names the
// resource metadata.
func (s *Server) mcpAuthed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r) {
			s.writeError(w, r, protocol.Errorf(protocol.Denied, "requests from another origin are refused").With("reason", "origin"))
			return
		}
		p, _, err := s.authenticate(r)
		if err != nil {
			if protocol.IsCode(err, protocol.AuthRequired) {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+baseURL(r)+ResourceMetadataPath+`"`)
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

// ResourceMetadata is the RFC 9728 protected-resource metadata of /mcp.
// Tokens are the principals' personal tokens (studio team tokens create):
// no authorization server issues them.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// handleResourceMetadata serves the metadata; like /healthz it is open.
func (s *Server) handleResourceMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ResourceMetadata{Resource: baseURL(r) + "/mcp", AuthorizationServers: []string{},
		BearerMethodsSupported: []string{"header"}, ResourceName: "Studio operator (MCP)"})
}
