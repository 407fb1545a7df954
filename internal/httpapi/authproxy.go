package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/principalname"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Sign-in behind an authenticating reverse proxy (what Grafana calls auth
// proxy): the proxy signs the person in (oauth2-proxy, Authelia, …) and
// names them in a header; the daemon believes that header only from the
// proxy's own address, the TCP peer of the connection (never
// X-Forwarded-For, which any client writes). A request that carries the
// header from any other address is refused, whatever else it carries.

// AuthProxyActor is the audit actor of the principals and role changes
// the proxy's headers cause: the proxy asserted them, no principal did.
const AuthProxyActor = "studio_auth_proxy"

// AuthProxy configures sign-in by a trusted proxy's header.
type AuthProxy struct {
	// Header names the signed-in user (e.g. X-Forwarded-User); its value,
	// in its canonical form (principalname.Canonical), is the proxy
	// principal's name, or a local principal's link.
	Header string
	// Trusted are the proxy's addresses: only a TCP peer inside one of
	// them may send Header (or GroupsHeader).
	Trusted []netip.Prefix
	// DefaultRole is the role of a principal the proxy names for the
	// first time, and of one in no mapped group when GroupsHeader is set.
	DefaultRole protocol.Role
	// GroupsHeader, when set, names the user's groups (comma-separated,
	// in one header); GroupRoles maps a group to a role. A proxy
	// principal's role is then set from the groups at every sign-in: the
	// highest role of the user's mapped groups, else DefaultRole. Without
	// it, a principal keeps the role it has (an admin changes it), and
	// only a new one gets DefaultRole. A linked local principal's role is
	// never set by the groups.
	GroupsHeader string
	GroupRoles   map[string]protocol.Role
}

// ParseTrusted reads CIDRs (a bare address is a /32 or /128).
func ParseTrusted(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		v = strings.TrimSpace(v)
		if !strings.Contains(v, "/") {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", v)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", v)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ParseGroupRoles reads GROUP=ROLE pairs.
func ParseGroupRoles(values []string) (map[string]protocol.Role, error) {
	out := map[string]protocol.Role{}
	for _, v := range values {
		group, role, ok := strings.Cut(strings.TrimSpace(v), "=")
		if !ok || group == "" {
			return nil, fmt.Errorf("%q is not GROUP=ROLE", v)
		}
		r, err := protocol.ParseRole(role)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", v, err)
		}
		out[group] = r
	}
	return out, nil
}

// Validate checks the configuration as a whole.
func (a *AuthProxy) Validate() error {
	switch {
	case a.Header == "":
		return fmt.Errorf("the auth proxy needs its user header")
	case len(a.Trusted) == 0:
		return fmt.Errorf("the auth proxy header needs the proxy's addresses (trusted CIDRs): without them anyone could name any user")
	case !a.DefaultRole.Valid():
		return fmt.Errorf("the auth proxy's default role %q is not one of %v", a.DefaultRole, protocol.Roles)
	case len(a.GroupRoles) > 0 && a.GroupsHeader == "":
		return fmt.Errorf("group roles need the groups header")
	}
	return nil
}

// trusts reports whether the connection's peer (r.RemoteAddr) is the proxy.
func (a *AuthProxy) trusts(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range a.Trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// roleOf is the role the groups give: the highest mapped one, else the
// default.
func (a *AuthProxy) roleOf(groups []string) protocol.Role {
	best := a.DefaultRole
	found := false
	for _, g := range groups {
		if r, ok := a.GroupRoles[g]; ok && (!found || r.Rank() > best.Rank()) {
			best, found = r, true
		}
	}
	return best
}

// carried reports whether the request carries the proxy's headers.
func (a *AuthProxy) carried(r *http.Request) bool {
	_, user := r.Header[http.CanonicalHeaderKey(a.Header)]
	groups := false
	if a.GroupsHeader != "" {
		_, groups = r.Header[http.CanonicalHeaderKey(a.GroupsHeader)]
	}
	return user || groups
}

// repeated is the refusal of a header the request carries more than once:
// a proxy that appends its header to the client's instead of replacing
// it would otherwise let the client's copy count.
func repeated(header string) error {
	return protocol.Errorf(protocol.Validation, "the %s header appears more than once; the sign-in proxy must send exactly one", header).
		With("field", header).With("reason", "repeated_header")
}

// proxyUser reads the proxy's user and groups from their one header each.
func (a *AuthProxy) proxyUser(r *http.Request) (user string, groups []string, err error) {
	values := r.Header.Values(a.Header)
	switch {
	case len(values) > 1:
		return "", nil, repeated(a.Header)
	case len(values) == 0:
		return "", nil, protocol.Errorf(protocol.Validation, "the sign-in proxy sent groups without its %s header", a.Header).
			With("field", a.Header)
	}
	user, err = principalname.Canonical(strings.TrimSpace(values[0]))
	if err != nil {
		return "", nil, protocol.ErrorOf(err).With("field", a.Header)
	}
	if a.GroupsHeader == "" {
		return user, nil, nil
	}
	gv := r.Header.Values(a.GroupsHeader)
	if len(gv) > 1 {
		return "", nil, repeated(a.GroupsHeader)
	}
	for _, v := range gv {
		for g := range strings.SplitSeq(v, ",") {
			if g = strings.TrimSpace(g); g != "" && !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	return user, groups, nil
}

// proxyPrincipal is the principal a trusted proxy names. The user is
// first the local principal an admin linked to it (its role stays as the
// admin set it), else the proxy principal of its name, created on first
// use, its role set from its groups when groups are configured. A local
// principal of that name that nobody linked is refused: the proxy never
// signs anyone in as a local principal (owner included) by name alone. A
// disabled principal stays refused. The credential keeps the principal
// and its groups, for a ticket's redemption to decide again.
func (s *Server) proxyPrincipal(r *http.Request) (protocol.Principal, credential, error) {
	p, user, err := s.proxySignIn(r)
	if err != nil {
		return protocol.Principal{}, credential{}, err
	}
	return p, credential{PrincipalID: p.ID, ProxyUser: user, Groups: p.Groups}, nil
}

// proxySignIn is the principal a trusted proxy names, with the groups it
// names with it, and the proxy's user.
func (s *Server) proxySignIn(r *http.Request) (protocol.Principal, string, error) {
	p, err := s.proxySignInAs(r)
	if err != nil {
		return p, "", err
	}
	user, _, _ := s.cfg.AuthProxy.proxyUser(r) // read once already: no error now
	return p, user, nil
}

func (s *Server) proxySignInAs(r *http.Request) (protocol.Principal, error) {
	a := s.cfg.AuthProxy
	refuse := func(err *protocol.Error) (protocol.Principal, error) {
		s.log.Warn("auth proxy sign-in refused", "peer", r.RemoteAddr, "reason", err.Message)
		return protocol.Principal{}, err
	}
	if !a.trusts(r) {
		return refuse(protocol.Errorf(protocol.AuthRequired, "the %s header is only accepted from the sign-in proxy's addresses", a.Header).
			With("reason", "auth_proxy"))
	}
	name, groups, err := a.proxyUser(r)
	if err != nil {
		return refuse(protocol.ErrorOf(err))
	}
	ps := s.cfg.Principals
	ctx, now := r.Context(), s.now()
	unavailable := func(what string, err error) (protocol.Principal, error) {
		s.log.Error(what, "err", err)
		return protocol.Principal{}, protocol.Errorf(protocol.ServiceFailure, "the sign-in could not be checked; try again")
	}
	p, err := ps.ProxyPrincipal(ctx, name)
	if protocol.IsCode(err, protocol.NotFound) {
		want := a.roleOf(groups)
		id := uuid.NewString()
		p, err = createPrincipal(ctx, ps, store.CreatePrincipalParams{ID: id, Name: name, Role: want, Origin: protocol.OriginProxy, Now: now,
			Audit: proxyAudit(ActionPrincipalCreated, id, map[string]any{"name": name, "role": want, "origin": protocol.OriginProxy, "groups": groups}, now)})
		if protocol.IsCode(err, protocol.Conflict) && protocol.ErrorOf(err).Details["reason"] != "confusable" {
			p, err = ps.ProxyPrincipal(ctx, name) // another request created it first
		}
	}
	switch {
	case protocol.IsCode(err, protocol.Conflict):
		return refuse(protocol.ErrorOf(err))
	case err != nil:
		return unavailable("auth proxy principal", err)
	case p.DisabledAt != nil:
		return refuse(protocol.Errorf(protocol.AuthRequired, "principal %s is disabled", p.Name).With("reason", "auth_proxy"))
	case p.ProxyUser == name: // linked by an admin: the local principal, as the admin set it
		w := p.Wire()
		w.Groups = groups
		return w, nil
	case p.Origin != protocol.OriginProxy:
		return refuse(protocol.Errorf(protocol.Denied, "the sign-in proxy's user %s has the name of a local principal; "+
			"it signs in as that principal only once an admin links them (studio principals link %s --proxy-user %s)", name, p.Name, name).
			With("reason", "local_principal").With("name", p.Name))
	}
	if want := a.roleOf(groups); a.GroupsHeader != "" && p.Role != want {
		if err := lastAdmin(r, ps, p); err != nil {
			s.log.Warn("auth proxy: the groups would demote the last admin; its role stays", "principal", name)
		} else {
			changed, err := ps.SetPrincipalRole(ctx, store.SetPrincipalRoleParams{Ref: p.ID, Role: want, Now: now,
				Audit: proxyAudit(ActionPrincipalRole, p.ID, map[string]any{"name": name, "from": p.Role, "role": want, "groups": groups}, now)})
			if err != nil {
				return unavailable("auth proxy role", err)
			}
			p = changed
		}
	}
	w := p.Wire()
	w.Groups = groups
	return w, nil
}

func proxyAudit(action, target string, details map[string]any, now time.Time) *store.AppendAdminEventParams {
	b, err := protocol.Marshal(details)
	if err != nil {
		b = []byte(`{}`)
	}
	return &store.AppendAdminEventParams{Actor: AuthProxyActor, Action: action, TargetID: &target, Details: b, Now: now}
}
