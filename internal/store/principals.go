package store

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Principal is a row of studio_principals: a named identity with a role
// and an origin. ProxyUser is the sign-in proxy's user an admin linked to
// a local principal ("" for none).
type Principal struct {
	ID         string
	Name       string
	Role       protocol.Role
	Origin     protocol.Origin
	ProxyUser  string
	CreatedAt  time.Time
	DisabledAt *time.Time
}

// Wire is the principal as requests carry it.
func (p Principal) Wire() protocol.Principal {
	return protocol.Principal{ID: p.ID, Name: p.Name, Role: p.Role, Origin: p.Origin}
}

// Token is a row of studio_principal_tokens. The token itself is never
// stored: Hash is its SHA-256 (hex), Prefix its visible start.
type Token struct {
	ID          string
	PrincipalID string
	Hash        string
	Prefix      string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	RevokedAt   *time.Time
	LastUsedAt  *time.Time
}

// PrincipalStore keeps principals and their tokens. Each change appends
// its audit row (when given) in the same transaction.
type PrincipalStore interface {
	// CreatePrincipal inserts a principal; a name or name key taken (even
	// by a disabled principal) is conflict.
	CreatePrincipal(ctx context.Context, p CreatePrincipalParams) (Principal, error)
	// GetPrincipal finds a principal by id or name; not_found if neither.
	GetPrincipal(ctx context.Context, ref string) (Principal, error)
	// ProxyPrincipal finds the principal the sign-in proxy's user may be:
	// the local principal linked to it, else the principal of that name
	// (of either origin: the caller refuses a local one); not_found if
	// neither.
	ProxyPrincipal(ctx context.Context, user string) (Principal, error)
	// LinkProxyUser links the sign-in proxy's user to a local, enabled
	// principal, or unlinks it (ProxyUser ""). A proxy principal is not
	// linked (validation); a user linked to another principal is conflict.
	LinkProxyUser(ctx context.Context, p LinkProxyUserParams) (Principal, error)
	// ListPrincipals lists every principal, disabled ones included, by name.
	ListPrincipals(ctx context.Context) ([]Principal, error)
	// SetPrincipalRole changes a principal's role.
	SetPrincipalRole(ctx context.Context, p SetPrincipalRoleParams) (Principal, error)
	// DisablePrincipal disables a principal (for good) and revokes its
	// tokens; disabling one already disabled returns it unchanged.
	DisablePrincipal(ctx context.Context, p DisablePrincipalParams) (Principal, error)
	// CreateToken stores a token's hash for a principal that is not
	// disabled (conflict otherwise, and for a hash stored already).
	CreateToken(ctx context.Context, p CreateTokenParams) (Token, error)
	// ListTokens lists tokens, newest first; PrincipalID, when set, keeps
	// that principal's.
	ListTokens(ctx context.Context, p ListTokensParams) ([]Token, error)
	// RevokeToken revokes a token by id (idempotent: a revoked token is
	// returned unchanged); not_found if absent.
	RevokeToken(ctx context.Context, p RevokeTokenParams) (Token, error)
	// Authenticate finds the principal of a token hash. An unknown,
	// revoked or expired token, or a disabled principal's, is
	// auth_required. It records the token's use when the last record is
	// older than LastUsedGranularity.
	Authenticate(ctx context.Context, p AuthenticateParams) (Principal, Token, error)
}

// AccessChanged is the control key (InstanceStore.ControlSignal) every
// commit that may take a right away notifies, in every process sharing
// the database: a token revoked, a principal disabled or given another
// role, a conversation's visibility changed. Open streams decide again
// when it fires.
const AccessChanged = "access.changed"

// LastUsedGranularity is how stale a token's last_used_at may be: one
// write per token per minute at most, not one per request.
const LastUsedGranularity = time.Minute

// CreatePrincipalParams creates a principal. Origin defaults to local.
// NameKey is the name's look-alike key (principalname.Skeleton): unique
// among the principals that have one, so two concurrent creations of
// look-alike names cannot both succeed.
type CreatePrincipalParams struct {
	ID      string
	Name    string
	NameKey string
	Role    protocol.Role
	Origin  protocol.Origin
	Now     time.Time
	Audit   *AppendAdminEventParams
}

// LinkProxyUserParams links (or, with ProxyUser "", unlinks) a local
// principal and a sign-in proxy's user; Ref is an id or a name.
type LinkProxyUserParams struct {
	Ref       string
	ProxyUser string
	Now       time.Time
	Audit     *AppendAdminEventParams
}

// SetPrincipalRoleParams changes a role; Ref is an id or a name.
type SetPrincipalRoleParams struct {
	Ref   string
	Role  protocol.Role
	Now   time.Time
	Audit *AppendAdminEventParams
}

// DisablePrincipalParams disables a principal; Ref is an id or a name.
type DisablePrincipalParams struct {
	Ref   string
	Now   time.Time
	Audit *AppendAdminEventParams
}

// CreateTokenParams stores a new token.
type CreateTokenParams struct {
	ID          string
	PrincipalID string
	Hash        string
	Prefix      string
	ExpiresAt   *time.Time
	Now         time.Time
	Audit       *AppendAdminEventParams
}

// ListTokensParams filters tokens.
type ListTokensParams struct {
	PrincipalID string
}

// RevokeTokenParams revokes a token.
type RevokeTokenParams struct {
	ID    string
	Now   time.Time
	Audit *AppendAdminEventParams
}

// AuthenticateParams looks a token hash up at Now.
type AuthenticateParams struct {
	Hash string
	Now  time.Time
}
