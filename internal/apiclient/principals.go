package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// Whoami is the principal the client's token belongs to, with the
// daemon's four-eyes policy.
func (c *Client) Whoami(ctx context.Context) (protocol.Whoami, error) {
	var p protocol.Whoami
	err := c.Do(ctx, http.MethodGet, "/api/auth/whoami", nil, &p)
	return p, err
}

// ListPrincipals lists every principal (admin).
func (c *Client) ListPrincipals(ctx context.Context) ([]protocol.PrincipalView, error) {
	var out struct {
		Principals []protocol.PrincipalView `json:"principals"`
	}
	err := c.Do(ctx, http.MethodGet, "/api/admin/principals", nil, &out)
	return out.Principals, err
}

// CreatePrincipal adds a principal (admin).
func (c *Client) CreatePrincipal(ctx context.Context, name string, role protocol.Role) (protocol.PrincipalView, error) {
	var p protocol.PrincipalView
	err := c.Do(ctx, http.MethodPost, "/api/admin/principals", protocol.CreatePrincipalRequest{Name: name, Role: string(role)}, &p)
	return p, err
}

// SetPrincipalRole changes a principal's role (admin).
func (c *Client) SetPrincipalRole(ctx context.Context, ref string, role protocol.Role) (protocol.PrincipalView, error) {
	var p protocol.PrincipalView
	err := c.Do(ctx, http.MethodPatch, "/api/admin/principals/"+url.PathEscape(ref), protocol.UpdatePrincipalRequest{Role: string(role)}, &p)
	return p, err
}

// DisablePrincipal disables a principal and revokes its tokens (admin).
func (c *Client) DisablePrincipal(ctx context.Context, ref string) (protocol.PrincipalView, error) {
	var p protocol.PrincipalView
	err := c.Do(ctx, http.MethodDelete, "/api/admin/principals/"+url.PathEscape(ref), nil, &p)
	return p, err
}

// LinkPrincipal links the sign-in proxy's user to a local principal
// (admin): that user then signs in as it.
func (c *Client) LinkPrincipal(ctx context.Context, ref, proxyUser string) (protocol.PrincipalView, error) {
	var p protocol.PrincipalView
	err := c.Do(ctx, http.MethodPut, "/api/admin/principals/"+url.PathEscape(ref)+"/link", protocol.LinkPrincipalRequest{ProxyUser: proxyUser}, &p)
	return p, err
}

// UnlinkPrincipal removes a local principal's proxy link (admin).
func (c *Client) UnlinkPrincipal(ctx context.Context, ref string) (protocol.PrincipalView, error) {
	var p protocol.PrincipalView
	err := c.Do(ctx, http.MethodDelete, "/api/admin/principals/"+url.PathEscape(ref)+"/link", nil, &p)
	return p, err
}

// CreateToken makes a personal token for a principal (admin); expiresIn
// is "" (never) or a lifetime like 90d. The answer holds the token, once.
func (c *Client) CreateToken(ctx context.Context, principal, expiresIn string) (protocol.NewTokenView, error) {
	var t protocol.NewTokenView
	err := c.Do(ctx, http.MethodPost, "/api/admin/principals/"+url.PathEscape(principal)+"/tokens", protocol.CreateTokenRequest{ExpiresIn: expiresIn}, &t)
	return t, err
}

// ListTokens lists tokens (admin), of one principal when given.
func (c *Client) ListTokens(ctx context.Context, principal string) ([]protocol.TokenView, error) {
	path := "/api/admin/tokens"
	if principal != "" {
		path += "?principal=" + url.QueryEscape(principal)
	}
	var out struct {
		Tokens []protocol.TokenView `json:"tokens"`
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out.Tokens, err
}

// RevokeToken revokes a token by id (admin).
func (c *Client) RevokeToken(ctx context.Context, id string) (protocol.TokenView, error) {
	var t protocol.TokenView
	err := c.Do(ctx, http.MethodDelete, "/api/admin/tokens/"+url.PathEscape(id), nil, &t)
	return t, err
}

// ExplainPolicy asks what the daemon's policies decide, and why (admin).
func (c *Client) ExplainPolicy(ctx context.Context, req policy.ExplainRequest) (policy.Explanation, error) {
	var x policy.Explanation
	err := c.Do(ctx, http.MethodPost, "/api/admin/policy/explain", req, &x)
	return x, err
}
