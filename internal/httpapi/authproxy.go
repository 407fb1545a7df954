package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"

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
	// lowercased, is the principal's name.
	Header string
	// Trusted are the proxy's addresses: only a TCP peer inside one of
	// them may send Header (or GroupsHeader).
	Trusted []netip.Prefix
	// DefaultRole is the role of a principal the proxy names for the
	// first time, and of one in no mapped group when GroupsHeader is set.
	DefaultRole protocol.Role
	// GroupsHeader, when set, names the user's groups (comma-separated);
	// GroupRoles maps a group to a role. The role is then set from the
	// groups at every sign-in: the highest role of the user's mapped
	// groups, else DefaultRole. Without it, a principal keeps the role it
	// has (an admin changes it), and only a new one gets DefaultRole.
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
		if r, ok := a.GroupRoles[strings.TrimSpace(g)]; ok && (!found || r.Rank() > best.Rank()) {
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

// proxyPrincipal is the principal a trusted proxy names: created on first
// use, its role set from its groups when groups are configured. A
// disabled principal stays refused.
func (s *Server) proxyPrincipal(r *http.Request) (protocol.Principal, credential, error) {
	p, groups, err := s.proxyUser(r)
	if err != nil {
		return protocol.Principal{}, credential{}, err
	}
	p.Origin, p.Groups = protocol.OriginProxy, groups
	return p, credential{PrincipalID: p.ID, Groups: groups}, nil
}

// proxyUser is the principal a trusted proxy names, and the groups it
// names with it.
func (s *Server) proxyUser(r *http.Request) (protocol.Principal, []string, error) {
	a := s.cfg.AuthProxy
	refuse := func(msg string, args ...any) (protocol.Principal, []string, error) {
		s.log.Warn("auth proxy sign-in refused", "peer", r.RemoteAddr, "reason", fmt.Sprintf(msg, args...))
		return protocol.Principal{}, nil, protocol.Errorf(protocol.AuthRequired, msg, args...).With("reason", "auth_proxy")
	}
	if !a.trusts(r) {
		return refuse("the %s header is only accepted from the sign-in proxy's addresses", a.Header)
	}
	values := r.Header.Values(a.Header)
	if len(values) != 1 {
		return refuse("the proxy must send exactly one %s header", a.Header)
	}
	name := strings.ToLower(strings.TrimSpace(values[0]))
	if err := ValidPrincipalName(name); err != nil {
		return refuse("the proxy's user %q is not a valid principal name", name)
	}
	ps := s.cfg.Principals
	ctx, now := r.Context(), s.now()
	// GetPrincipal finds ids too: only a principal of that very name is it.
	byName := func() (store.Principal, error) {
		p, err := ps.GetPrincipal(ctx, name)
		if err == nil && p.Name != name {
			return store.Principal{}, protocol.Errorf(protocol.NotFound, "principal %s not found", name)
		}
		return p, err
	}
	p, err := byName()
	want, byGroups := a.DefaultRole, a.GroupsHeader != ""
	var groups []string
	if byGroups {
		for _, v := range r.Header.Values(a.GroupsHeader) {
			for _, g := range strings.Split(v, ",") {
				if g = strings.TrimSpace(g); g != "" {
					groups = append(groups, g)
				}
			}
		}
		want = a.roleOf(groups)
	}
	if protocol.IsCode(err, protocol.NotFound) {
		id := uuid.NewString()
		p, err = ps.CreatePrincipal(ctx, store.CreatePrincipalParams{ID: id, Name: name, Role: want, Now: now,
			Audit: proxyAudit(ActionPrincipalCreated, id, map[string]any{"name": name, "role": want, "groups": groups}, now)})
		if protocol.IsCode(err, protocol.Conflict) { // another request created it first
			p, err = byName()
		}
	}
	if protocol.IsCode(err, protocol.NotFound) {
		return refuse("the proxy's user %q cannot be a principal", name)
	}
	if err != nil {
		s.log.Error("auth proxy principal", "err", err)
		return protocol.Principal{}, nil, protocol.Errorf(protocol.ServiceFailure, "the sign-in could not be checked; try again")
	}
	if p.DisabledAt != nil {
		return refuse("principal %s is disabled", name)
	}
	if byGroups && p.Role != want {
		if err := lastAdmin(r, ps, p); err != nil {
			s.log.Warn("auth proxy: the groups would demote the last admin; its role stays", "principal", name)
			return p.Wire(), groups, nil
		}
		changed, err := ps.SetPrincipalRole(ctx, store.SetPrincipalRoleParams{Ref: p.ID, Role: want, Now: now,
			Audit: proxyAudit(ActionPrincipalRole, p.ID, map[string]any{"name": name, "from": p.Role, "role": want, "groups": groups}, now)})
		if err != nil {
			s.log.Error("auth proxy role", "err", err)
			return protocol.Principal{}, nil, protocol.Errorf(protocol.ServiceFailure, "the sign-in could not be checked; try again")
		}
		p = changed
	}
	return p.Wire(), groups, nil
}

func proxyAudit(action, target string, details map[string]any, now time.Time) *store.AppendAdminEventParams {
	b, err := protocol.Marshal(details)
	if err != nil {
		b = []byte(`{}`)
	}
	return &store.AppendAdminEventParams{Actor: AuthProxyActor, Action: action, TargetID: &target, Details: b, Now: now}
}
