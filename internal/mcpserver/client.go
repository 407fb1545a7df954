package mcpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/coordinator"
)

// Each MCP client gets its own agent conversation (one per principal and
// client name), so one client's pending proposal never blocks another's
// call. The name comes from the client, in the order a stateless server
// can know it:
//
//   - 2026-07-28: the request's own _meta clientInfo;
//   - 2025-03-26 to 2025-11-25: the initialize's clientInfo, carried by the
//     Mcp-Session-Id this server answered it with (the session id is
//     "studio.<base64url name>.<random>"; nothing is stored, so any daemon
//     of a cluster reads it) and the client sends on every request;
//   - neither: the bearer token's own id ("mcp client 1a2b3c4d", a hash
//     prefix), so two programs with two tokens never share one.
//
// The name is the client's claim: it picks a conversation of the caller's
// own principal, never another's.

const sessionHeader = "Mcp-Session-Id"

const sessionPrefix = "studio."

// newSessionID is a session id carrying a client's name.
func newSessionID(name string) string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return sessionPrefix + base64.RawURLEncoding.EncodeToString([]byte(coordinator.ClientName(name))) + "." + hex.EncodeToString(nonce[:])
}

// sessionClient is the client name a session id of newSessionID carries.
func sessionClient(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, sessionPrefix)
	if !ok {
		return "", false
	}
	enc, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return coordinator.ClientName(string(b)), true
}

// clientName is the calling client's name (see above).
func clientName(req *mcp.CallToolRequest) string {
	if ci := req.ClientInfo(); ci != nil && strings.TrimSpace(ci.Name) != "" {
		return coordinator.ClientName(ci.Name)
	}
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	if name, ok := sessionClient(h.Get(sessionHeader)); ok {
		return name
	}
	if scheme, token, ok := strings.Cut(h.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
		sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
		return "mcp client " + hex.EncodeToString(sum[:4])
	}
	return coordinator.ClientName("")
}
