package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/principalname"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The admin API of principals and tokens (/api/admin/...), and whoami.
// Every change is audited with the acting principal as actor, in the
// change's transaction.

// Audit actions of principal and token changes.
const (
	ActionPrincipalCreated  = "studio.principal.created"
	ActionPrincipalRole     = "studio.principal.role_changed"
	ActionPrincipalRevoked  = "studio.principal.disabled"
	ActionPrincipalLinked   = "studio.principal.linked"
	ActionPrincipalUnlinked = "studio.principal.unlinked"
	ActionTokenCreated      = "studio.token.created"
	ActionTokenRevoked      = "studio.token.revoked"
)

// MaxTokenLifetime bounds a token's expiry.
const MaxTokenLifetime = 10 * 365 * 24 * time.Hour

// principalRef is a path's principal reference as the store knows it: a
// name in its canonical form (Alice is alice), anything else (an id)
// as it is.
func principalRef(ref string) string {
	if name, err := principalname.Canonical(ref); err == nil {
		return name
	}
	return ref
}

// refuseLookAlike refuses a new principal's name that looks like an
// existing principal's name, or a proxy user linked to one (a different
// name with the same UTS #39 skeleton). Principals named before names had
// look-alike keys are compared here; the store's unique key refuses the
// look-alikes two creations insert at once.
func refuseLookAlike(ctx context.Context, ps store.PrincipalStore, name string) error {
	list, err := ps.ListPrincipals(ctx)
	if err != nil {
		return err
	}
	for _, p := range list {
		for _, other := range []string{p.Name, p.ProxyUser} {
			if other != "" && principalname.Confusable(name, other) {
				return protocol.Errorf(protocol.Conflict, "the name %q looks like the principal %q's; choose another", name, p.Name).
					With("kind", "principal").With("name", p.Name).With("id", p.ID).With("reason", "confusable")
			}
		}
	}
	return nil
}

// createPrincipal creates a principal of a canonical name that looks like
// no other's.
func createPrincipal(ctx context.Context, ps store.PrincipalStore, p store.CreatePrincipalParams) (store.Principal, error) {
	if err := refuseLookAlike(ctx, ps, p.Name); err != nil {
		return store.Principal{}, err
	}
	p.NameKey = principalname.Skeleton(p.Name)
	return ps.CreatePrincipal(ctx, p)
}

func stampPtr(t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	v := protocol.Timestamp(*t)
	return &v
}

func principalView(p store.Principal) protocol.PrincipalView {
	var link *string
	if p.ProxyUser != "" {
		link = &p.ProxyUser
	}
	return protocol.PrincipalView{ID: p.ID, Name: p.Name, Role: p.Role, Origin: p.Origin, ProxyUser: link,
		CreatedAt: protocol.Timestamp(p.CreatedAt), DisabledAt: stampPtr(p.DisabledAt)}
}

func tokenView(t store.Token, principal string) protocol.TokenView {
	return protocol.TokenView{ID: t.ID, Principal: principal, Prefix: t.Prefix, CreatedAt: protocol.Timestamp(t.CreatedAt),
		ExpiresAt: stampPtr(t.ExpiresAt), RevokedAt: stampPtr(t.RevokedAt), LastUsedAt: stampPtr(t.LastUsedAt)}
}

// ParseLifetime reads a token lifetime: a Go duration or a number of days
// ("90d"); it must be positive and at most MaxTokenLifetime.
func ParseLifetime(v string) (time.Duration, error) {
	bad := protocol.Errorf(protocol.Validation, "expiresIn must be a positive duration like 90d or 720h, at most 3650d").With("field", "expiresIn")
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, bad
		}
	}
	if d <= 0 || d > MaxTokenLifetime {
		return 0, bad
	}
	return d, nil
}

func (s *Server) principalRoutes() {
	m, a := s.mux, s.authed
	m.HandleFunc("GET /api/auth/whoami", a(s.handleWhoami))
	m.HandleFunc("GET /api/admin/principals", a(s.handleListPrincipals))
	m.HandleFunc("POST /api/admin/principals", a(s.handleCreatePrincipal))
	m.HandleFunc("PATCH /api/admin/principals/{ref}", a(s.handleUpdatePrincipal))
	m.HandleFunc("DELETE /api/admin/principals/{ref}", a(s.handleDisablePrincipal))
	m.HandleFunc("PUT /api/admin/principals/{ref}/link", a(s.handleLinkPrincipal))
	m.HandleFunc("DELETE /api/admin/principals/{ref}/link", a(s.handleUnlinkPrincipal))
	m.HandleFunc("POST /api/admin/principals/{ref}/tokens", a(s.handleCreateToken))
	m.HandleFunc("GET /api/admin/tokens", a(s.handleListTokens))
	m.HandleFunc("DELETE /api/admin/tokens/{id}", a(s.handleRevokeToken))
}

// principals is the principal store, or the typed refusal when the daemon
// keeps none (the single-token configuration).
func (s *Server) principals() (store.PrincipalStore, error) {
	if s.cfg.Principals == nil {
		return nil, protocol.Errorf(protocol.Denied, "this daemon keeps no principals; it accepts its one token")
	}
	return s.cfg.Principals, nil
}

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	who, _ := protocol.PrincipalFrom(r.Context())
	writeJSON(w, http.StatusOK, protocol.Whoami{Principal: who, SecondApproverFor: s.gate.Engine().SecondApproverFor()})
}

// adminAudit is the audit row of a principal or token change.
func adminAudit(r *http.Request, action, target string, details map[string]any, now time.Time) *store.AppendAdminEventParams {
	who, _ := protocol.PrincipalFrom(r.Context())
	b, err := protocol.Marshal(details)
	if err != nil {
		b = []byte(`{}`)
	}
	return &store.AppendAdminEventParams{Actor: who.Name, Action: action, TargetID: &target, Details: b, Now: now}
}

func (s *Server) handleListPrincipals(w http.ResponseWriter, r *http.Request) {
	ps, err := s.principals()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := ps.ListPrincipals(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]protocol.PrincipalView, len(list))
	for i, p := range list {
		out[i] = principalView(p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"principals": out})
}

func (s *Server) handleCreatePrincipal(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreatePrincipalRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.principals()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name, err := principalname.Canonical(req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	role, err := protocol.ParseRole(req.Role)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, now := uuid.NewString(), s.now()
	p, err := createPrincipal(r.Context(), ps, store.CreatePrincipalParams{ID: id, Name: name, Role: role, Origin: protocol.OriginLocal, Now: now,
		Audit: adminAudit(r, ActionPrincipalCreated, id, map[string]any{"name": name, "role": role, "origin": protocol.OriginLocal}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, principalView(p))
}

// lastAdmin refuses a change that would leave no enabled admin: nobody
// could manage principals any more.
func lastAdmin(r *http.Request, ps store.PrincipalStore, target store.Principal) error {
	if target.Role != protocol.RoleAdmin || target.DisabledAt != nil {
		return nil
	}
	list, err := ps.ListPrincipals(r.Context())
	if err != nil {
		return err
	}
	for _, p := range list {
		if p.ID != target.ID && p.Role == protocol.RoleAdmin && p.DisabledAt == nil {
			return nil
		}
	}
	return protocol.Errorf(protocol.Conflict, "%s is the last admin; make another principal admin first", target.Name)
}

func (s *Server) handleUpdatePrincipal(w http.ResponseWriter, r *http.Request) {
	var req protocol.UpdatePrincipalRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.principals()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	role, err := protocol.ParseRole(req.Role)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cur, err := ps.GetPrincipal(r.Context(), principalRef(r.PathValue("ref")))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if role != protocol.RoleAdmin {
		if err := lastAdmin(r, ps, cur); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	now := s.now()
	p, err := ps.SetPrincipalRole(r.Context(), store.SetPrincipalRoleParams{Ref: cur.ID, Role: role, Now: now,
		Audit: adminAudit(r, ActionPrincipalRole, cur.ID, map[string]any{"name": cur.Name, "from": cur.Role, "role": role}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, principalView(p))
}

// pathPrincipal is the principal store and the principal the path's
// {ref} names.
func (s *Server) pathPrincipal(r *http.Request) (store.PrincipalStore, store.Principal, error) {
	ps, err := s.principals()
	if err != nil {
		return nil, store.Principal{}, err
	}
	cur, err := ps.GetPrincipal(r.Context(), principalRef(r.PathValue("ref")))
	return ps, cur, err
}

func (s *Server) handleDisablePrincipal(w http.ResponseWriter, r *http.Request) {
	ps, cur, err := s.pathPrincipal(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := lastAdmin(r, ps, cur); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.now()
	p, err := ps.DisablePrincipal(r.Context(), store.DisablePrincipalParams{Ref: cur.ID, Now: now,
		Audit: adminAudit(r, ActionPrincipalRevoked, cur.ID, map[string]any{"name": cur.Name}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, principalView(p))
}

// handleLinkPrincipal links a sign-in proxy's user to a local principal:
// from then on that user signs in as it (its role stays the admin's to
// set; the groups header does not change it).
func (s *Server) handleLinkPrincipal(w http.ResponseWriter, r *http.Request) {
	var req protocol.LinkPrincipalRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	user, err := principalname.Canonical(req.ProxyUser)
	if err != nil {
		s.writeError(w, r, protocol.ErrorOf(err).With("field", "proxyUser"))
		return
	}
	s.link(w, r, user, ActionPrincipalLinked)
}

// handleUnlinkPrincipal removes a local principal's proxy link: the proxy
// user no longer signs in as it.
func (s *Server) handleUnlinkPrincipal(w http.ResponseWriter, r *http.Request) {
	s.link(w, r, "", ActionPrincipalUnlinked)
}

func (s *Server) link(w http.ResponseWriter, r *http.Request, user, action string) {
	ps, cur, err := s.pathPrincipal(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.now()
	details := map[string]any{"name": cur.Name, "proxyUser": user}
	if user == "" {
		details["proxyUser"] = cur.ProxyUser
	}
	p, err := ps.LinkProxyUser(r.Context(), store.LinkProxyUserParams{Ref: cur.ID, ProxyUser: user, Now: now,
		Audit: adminAudit(r, action, cur.ID, details, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, principalView(p))
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreateTokenRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.principals()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.now()
	var expires *time.Time
	if req.ExpiresIn != "" {
		d, err := ParseLifetime(req.ExpiresIn)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		at := now.Add(d)
		expires = &at
	}
	owner, err := ps.GetPrincipal(r.Context(), principalRef(r.PathValue("ref")))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	token, id := NewToken(), uuid.NewString()
	prefix := TokenDisplayPrefix(token)
	t, err := ps.CreateToken(r.Context(), store.CreateTokenParams{ID: id, PrincipalID: owner.ID, Hash: HashToken(token), Prefix: prefix,
		ExpiresAt: expires, Now: now,
		Audit: adminAudit(r, ActionTokenCreated, id, map[string]any{"principal": owner.Name, "prefix": prefix, "expiresAt": stampPtr(expires)}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, protocol.NewTokenView{TokenView: tokenView(t, owner.Name), Token: token})
}

func (s *Server) handleListTokens(w http.ResponseWriter, r *http.Request) {
	ps, err := s.principals()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := ps.ListPrincipals(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	names := make(map[string]string, len(all))
	for _, p := range all {
		names[p.ID] = p.Name
	}
	var filter store.ListTokensParams
	if ref := r.URL.Query().Get("principal"); ref != "" {
		p, err := ps.GetPrincipal(r.Context(), principalRef(ref))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		filter.PrincipalID = p.ID
	}
	list, err := ps.ListTokens(r.Context(), filter)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]protocol.TokenView, len(list))
	for i, t := range list {
		out[i] = tokenView(t, names[t.PrincipalID])
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	ps, err := s.principals()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, now := r.PathValue("id"), s.now()
	t, err := ps.RevokeToken(r.Context(), store.RevokeTokenParams{ID: id, Now: now,
		Audit: adminAudit(r, ActionTokenRevoked, id, map[string]any{}, now)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner, _ := ps.GetPrincipal(r.Context(), t.PrincipalID)
	writeJSON(w, http.StatusOK, tokenView(t, owner.Name))
}
