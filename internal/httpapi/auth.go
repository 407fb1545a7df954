package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Authentication: who a request acts for. A request that carries the
// sign-in proxy's header (Config.AuthProxy) acts for the user it names
// when it comes from the proxy, and is refused otherwise (authproxy.go).
// A bearer token is a principal's
// personal token, looked up by its hash in StateDB on every request, so a
// revocation committed by any daemon sharing the database refuses the
// token from the next request on (no cache to outlive it). Without a
// principal store (Config.Principals nil: tests, the degraded API) the one
// configured token is the bootstrap admin, owner.

// TokenPrefix starts every personal token: a leaked one is recognisable.
const TokenPrefix = "stu_"

// tokenBytes is a token's randomness: 256 bits.
const tokenBytes = 32

// OwnerName is the bootstrap admin principal: the token file's.
const OwnerName = protocol.OwnerPrincipal

// legacyOwner is the principal of the configured token when no principal
// store is configured.
var legacyOwner = protocol.Principal{ID: OwnerName, Name: OwnerName, Role: protocol.RoleAdmin, Origin: protocol.OriginLocal}

// NewToken is a new personal token: the prefix and 256 random bits,
// base64url. It is shown once; only HashToken of it is stored.
func NewToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is what StateDB keeps of a token: its SHA-256, hex. A token
// has 256 bits of entropy, so a fast hash is enough: nothing to guess.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenDisplayPrefix is the visible start of a token kept with its hash.
func TokenDisplayPrefix(token string) string {
	if len(token) > len(TokenPrefix)+8 {
		return token[:len(TokenPrefix)+8]
	}
	return token
}

// bearerToken is the request's bearer token. A credential in the URL is
// refused even alongside a valid header: tokens never belong in URLs or
// logs (docs/design.md §12).
func bearerToken(r *http.Request) (string, error) {
	q := r.URL.Query()
	if q.Has("token") || q.Has("access_token") {
		return "", protocol.Errorf(protocol.AuthRequired, "credentials are never accepted in a URL; send Authorization: Bearer")
	}
	// The scheme is case-insensitive (RFC 9110 §11.1): bearer, BEARER.
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", protocol.Errorf(protocol.AuthRequired, "a valid bearer token is required")
	}
	return token, nil
}

// credential is what a request authenticated with, kept to authenticate
// again later: a stream ticket's redemption, an open stream after a
// revocation (store.TicketMinter: the principal, its token's hash, or the
// groups a sign-in proxy named).
type credential = store.TicketMinter

// authenticate finds the principal of the request's bearer token: unknown,
// revoked and expired tokens, and disabled principals', are auth_required.
func (s *Server) authenticate(r *http.Request) (protocol.Principal, credential, error) {
	if s.cfg.AuthProxy != nil && s.cfg.Principals != nil && s.cfg.AuthProxy.carried(r) {
		return s.proxyPrincipal(r)
	}
	token, err := bearerToken(r)
	if err != nil {
		return protocol.Principal{}, credential{}, err
	}
	cred := credential{TokenHash: HashToken(token)}
	if s.cfg.Principals == nil {
		if subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.Token)) != 1 {
			return protocol.Principal{}, credential{}, protocol.Errorf(protocol.AuthRequired, "a valid bearer token is required")
		}
		cred.PrincipalID = legacyOwner.ID
		return legacyOwner, cred, nil
	}
	p, err := s.tokenPrincipal(r.Context(), cred.TokenHash)
	cred.PrincipalID = p.ID
	return p, cred, err
}

// tokenPrincipal is the principal of a token's hash.
func (s *Server) tokenPrincipal(ctx context.Context, hash string) (protocol.Principal, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	p, _, err := s.cfg.Principals.Authenticate(ctx, store.AuthenticateParams{Hash: hash, Now: s.now()})
	if err != nil {
		if !protocol.IsCode(err, protocol.AuthRequired) {
			s.log.Error("authenticate", "err", err)
			return protocol.Principal{}, protocol.Errorf(protocol.ServiceFailure, "credentials could not be checked; try again")
		}
		return protocol.Principal{}, err
	}
	return p.Wire(), nil
}

// reauthenticate is the principal of a credential kept from an earlier
// request, as it is now: auth_required when its token was revoked or
// expired, or its principal disabled, since.
func (s *Server) reauthenticate(ctx context.Context, cred credential) (protocol.Principal, error) {
	gone := protocol.Errorf(protocol.AuthRequired, "the credential this was opened with is no longer valid")
	switch {
	case s.cfg.Principals == nil:
		if cred.TokenHash == "" || subtle.ConstantTimeCompare([]byte(cred.TokenHash), []byte(HashToken(s.cfg.Token))) != 1 {
			return protocol.Principal{}, gone
		}
		return legacyOwner, nil
	case cred.TokenHash != "":
		p, err := s.tokenPrincipal(ctx, cred.TokenHash)
		if err == nil && p.ID != cred.PrincipalID {
			return protocol.Principal{}, gone
		}
		return p, err
	case cred.PrincipalID != "" && cred.ProxyUser != "": // a sign-in proxy's user
		// Resolved again as the proxy's sign-in would now: the principal
		// linked to the user, else the proxy principal of its name. A link
		// an admin removed (or moved) since signs the user in as no one.
		p, err := s.cfg.Principals.ProxyPrincipal(ctx, cred.ProxyUser)
		if protocol.IsCode(err, protocol.NotFound) || err == nil && (p.DisabledAt != nil || p.ID != cred.PrincipalID ||
			p.ProxyUser != cred.ProxyUser && p.Origin != protocol.OriginProxy) {
			return protocol.Principal{}, gone
		}
		if err != nil {
			s.log.Error("authenticate", "err", err)
			return protocol.Principal{}, protocol.Errorf(protocol.ServiceFailure, "credentials could not be checked; try again")
		}
		w := p.Wire()
		w.Groups = cred.Groups
		return w, nil
	}
	return protocol.Principal{}, gone // a ticket from before credentials were kept
}

type credentialKey struct{}

// credentialFrom is the credential the request authenticated with.
func credentialFrom(ctx context.Context) credential {
	c, _ := ctx.Value(credentialKey{}).(credential)
	return c
}

// authed authenticates the request, decides its route (RouteActions) and
// carries the principal, its credential and the policy's gate in the
// request's context.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, cred, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(s.withPolicy(r.Context(), p), credentialKey{}, cred))
		if err := s.authorize(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r)
	}
}

// checkBearer authenticates the request without deciding anything: any
// principal may (the health check's reason).
func (s *Server) checkBearer(r *http.Request) error {
	_, _, err := s.authenticate(r)
	return err
}
