package protocol

import (
	"context"
	"slices"
)

// Role is a principal's role: what it may do through the API. Roles are
// ordered; each allows everything the lesser ones do.
type Role string

// Roles, least to most.
const (
	// RoleViewer reads: the cockpit, conversations, proposals, the audit.
	RoleViewer Role = "viewer"
	// RoleAgent is a program: it converses and proposes, never confirms
	// a proposal and never acknowledges an effect for a browser.
	RoleAgent Role = "agent"
	// RoleOperator converses, acknowledges effects, runs the cockpit's
	// commands and confirms proposals of risk mutate or execute.
	RoleOperator Role = "operator"
	// RoleApprover confirms proposals of any risk.
	RoleApprover Role = "approver"
	// RoleAdmin may do everything, principals and maintenance included.
	RoleAdmin Role = "admin"
)

// Roles lists the roles, least to most.
var Roles = []Role{RoleViewer, RoleAgent, RoleOperator, RoleApprover, RoleAdmin}

// Rank is the role's place in Roles (-1 for an unknown role).
func (r Role) Rank() int { return slices.Index(Roles, r) }

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.Rank() >= 0 }

// Allows reports whether r is at least need.
func (r Role) Allows(need Role) bool { return r.Valid() && r.Rank() >= need.Rank() }

// ParseRole reads a role name; anything else is a validation error.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", Errorf(Validation, "role must be one of %v, not %q", Roles, s).With("field", "role")
	}
	return r, nil
}

// OwnerPrincipal is the name of the bootstrap admin principal, whose
// token is the data directory's token file.
const OwnerPrincipal = "owner"

// Conversation visibility: who besides admins sees a conversation.
const (
	// VisibilityPrivate: its owner (and admins) only.
	VisibilityPrivate = "private"
	// VisibilityTeam: every principal; the default.
	VisibilityTeam = "team"
)

// ParseVisibility reads a visibility; anything else is a validation error.
func ParseVisibility(s string) (string, error) {
	if s != VisibilityPrivate && s != VisibilityTeam {
		return "", Errorf(Validation, "visibility must be private or team, not %q", s).With("field", "visibility")
	}
	return s, nil
}

// Origin is where a principal comes from. A proxy principal never acts as
// a local one: the sign-in proxy's user of a local principal's name is
// refused until an admin links the two.
type Origin string

// Origins.
const (
	// OriginLocal: made by an admin, or the bootstrap owner; signs in
	// with its tokens, or through the proxy when an admin linked it.
	OriginLocal Origin = "local"
	// OriginProxy: made by the sign-in proxy's header on first use.
	OriginProxy Origin = "proxy"
)

// Principal is who a request acts for: its id, unique name, role and
// origin, and the groups the sign-in proxy named for this request (none
// for a bearer token).
type Principal struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Role   Role     `json:"role"`
	Origin Origin   `json:"origin"`
	Groups []string `json:"groups,omitempty"`
}

type principalKey struct{}

// WithPrincipal is ctx carrying the principal a request acts for. Only the
// HTTP edge sets it, from a credential, never from model output.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the principal ctx carries, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Whoami is the answer of GET /api/auth/whoami: the principal and what
// the cockpit needs to show which of its controls this principal may use.
type Whoami struct {
	Principal
	// SecondApproverFor lists the risks and impacts whose proposals the
	// principal whose turn produced them cannot confirm (four-eyes);
	// empty when the daemon has no such policy.
	SecondApproverFor []string `json:"secondApproverFor"`
}

// PrincipalView is a principal on the wire. ProxyUser is the sign-in
// proxy's user an admin linked to a local principal (null when none).
type PrincipalView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Role       Role     `json:"role"`
	Origin     Origin   `json:"origin"`
	ProxyUser  *string  `json:"proxyUser"`
	CreatedAt  float64  `json:"createdAt"`
	DisabledAt *float64 `json:"disabledAt"`
}

// TokenView is a token on the wire: never the token, only its prefix.
type TokenView struct {
	ID         string   `json:"id"`
	Principal  string   `json:"principal"` // the principal's name
	Prefix     string   `json:"prefix"`
	CreatedAt  float64  `json:"createdAt"`
	ExpiresAt  *float64 `json:"expiresAt"`
	RevokedAt  *float64 `json:"revokedAt"`
	LastUsedAt *float64 `json:"lastUsedAt"`
}

// NewTokenView is a token just created: the only answer that holds it.
type NewTokenView struct {
	TokenView
	Token string `json:"token"`
}

// CreatePrincipalRequest is the body of POST /api/admin/principals.
type CreatePrincipalRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// UpdatePrincipalRequest is the body of PATCH /api/admin/principals/{ref}.
type UpdatePrincipalRequest struct {
	Role string `json:"role"`
}

// LinkPrincipalRequest is the body of PUT /api/admin/principals/{ref}/link:
// the sign-in proxy's user that then signs in as this local principal.
type LinkPrincipalRequest struct {
	ProxyUser string `json:"proxyUser"`
}

// CreateTokenRequest is the body of POST /api/admin/principals/{ref}/tokens.
type CreateTokenRequest struct {
	// ExpiresIn is a lifetime: Go durations (720h) or days (90d); empty
	// for a token that does not expire.
	ExpiresIn string `json:"expiresIn,omitempty"`
}
