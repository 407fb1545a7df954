package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Principals and their tokens (store.PrincipalStore). A write reads the
// row it checks with the dialect's lock, like the application's
// resources; a name two PostgreSQL writers insert at once is a unique
// violation, retried into the ordinary conflict.

const principalCols = `id, name, role, origin, proxy_user, created_at, disabled_at`

func scanPrincipal(row scanner) (store.Principal, error) {
	var p store.Principal
	var created float64
	var disabled sql.NullFloat64
	var proxyUser sql.NullString
	if err := row.Scan(&p.ID, &p.Name, &p.Role, &p.Origin, &proxyUser, &created, &disabled); err != nil {
		return p, err
	}
	p.ProxyUser = proxyUser.String
	p.CreatedAt, p.DisabledAt = fromTS(created), nullTS(disabled)
	return p, nil
}

const tokenCols = `id, principal_id, token_hash, prefix, created_at, expires_at, revoked_at, last_used_at`

func scanToken(row scanner) (store.Token, error) {
	var t store.Token
	var created float64
	var expires, revoked, used sql.NullFloat64
	if err := row.Scan(&t.ID, &t.PrincipalID, &t.Hash, &t.Prefix, &created, &expires, &revoked, &used); err != nil {
		return t, err
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt, t.LastUsedAt = fromTS(created), nullTS(expires), nullTS(revoked), nullTS(used)
	return t, nil
}

func loadPrincipal(ctx context.Context, q querier, ref, lock string) (store.Principal, error) {
	p, err := scanPrincipal(q.QueryRowContext(ctx, `SELECT `+principalCols+` FROM studio_principals WHERE id = ? OR name = ?`+lock, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound("principal", ref)
	}
	if err != nil {
		return p, fmt.Errorf("get principal: %w", err)
	}
	return p, nil
}

// CreatePrincipal implements store.PrincipalStore.
func (s *Store) CreatePrincipal(ctx context.Context, p store.CreatePrincipalParams) (store.Principal, error) {
	if !p.Role.Valid() {
		return store.Principal{}, protocol.Errorf(protocol.Validation, "unknown role %q", p.Role).With("field", "role")
	}
	origin := p.Origin
	if origin == "" {
		origin = protocol.OriginLocal
	}
	if origin != protocol.OriginLocal && origin != protocol.OriginProxy {
		return store.Principal{}, protocol.Errorf(protocol.Validation, "unknown origin %q", p.Origin).With("field", "origin")
	}
	var out store.Principal
	err := s.txn(ctx, func(tx *writeTx) error {
		if cur, err := loadPrincipal(ctx, tx, p.Name, tx.locks.update); err == nil {
			return nameTaken("principal", p.Name, cur.ID)
		} else if !protocol.IsCode(err, protocol.NotFound) {
			return err
		}
		if p.NameKey != "" {
			cur, err := scanPrincipal(tx.QueryRowContext(ctx, `SELECT `+principalCols+` FROM studio_principals WHERE name_key = ?`, p.NameKey))
			if err == nil {
				return lookAlike(p.Name, cur)
			} else if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("create principal: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_principals (id, name, name_key, role, origin, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			p.ID, p.Name, nullIfEmpty(p.NameKey), string(p.Role), string(origin), ts(p.Now)); err != nil {
			return fmt.Errorf("create principal: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		var err error
		out, err = loadPrincipal(ctx, tx, p.ID, "")
		return err
	})
	return out, err
}

// lookAlike is the conflict of a name that looks like an existing
// principal's.
func lookAlike(name string, cur store.Principal) error {
	return protocol.Errorf(protocol.Conflict, "the name %q looks like the principal %q's; choose another", name, cur.Name).
		With("kind", "principal").With("name", cur.Name).With("id", cur.ID).With("reason", "confusable")
}

// GetPrincipal implements store.PrincipalStore.
func (s *Store) GetPrincipal(ctx context.Context, ref string) (store.Principal, error) {
	return loadPrincipal(ctx, s.r, ref, "")
}

// ProxyPrincipal implements store.PrincipalStore: the link first, then the
// name, in one query (it runs on every request the proxy signs in).
func (s *Store) ProxyPrincipal(ctx context.Context, user string) (store.Principal, error) {
	p, err := scanPrincipal(s.r.QueryRowContext(ctx, `SELECT `+principalCols+` FROM studio_principals
		WHERE proxy_user = ? OR name = ? ORDER BY CASE WHEN proxy_user = ? THEN 0 ELSE 1 END LIMIT 1`, user, user, user))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound("principal", user)
	}
	if err != nil {
		return p, fmt.Errorf("proxy principal: %w", err)
	}
	return p, nil
}

// LinkProxyUser implements store.PrincipalStore.
func (s *Store) LinkProxyUser(ctx context.Context, p store.LinkProxyUserParams) (store.Principal, error) {
	var out store.Principal
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadPrincipal(ctx, tx, p.Ref, tx.locks.update)
		if err != nil {
			return err
		}
		switch {
		case cur.Origin != protocol.OriginLocal:
			return protocol.Errorf(protocol.Validation, "%s is a proxy principal: only a local principal is linked to a proxy user", cur.Name).
				With("field", "principal")
		case cur.DisabledAt != nil:
			return protocol.Errorf(protocol.Conflict, "principal %s is disabled", cur.Name)
		case cur.ProxyUser == p.ProxyUser:
			out = cur
			return nil
		}
		if p.ProxyUser != "" {
			other, err := scanPrincipal(tx.QueryRowContext(ctx, `SELECT `+principalCols+` FROM studio_principals WHERE proxy_user = ?`, p.ProxyUser))
			if err == nil {
				return protocol.Errorf(protocol.Conflict, "the proxy user %q is linked to %s already; unlink it first", p.ProxyUser, other.Name).
					With("name", other.Name).With("id", other.ID)
			} else if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("link proxy user: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_principals SET proxy_user = ? WHERE id = ?`, nullIfEmpty(p.ProxyUser), cur.ID); err != nil {
			return fmt.Errorf("link proxy user: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = loadPrincipal(ctx, tx, cur.ID, "")
		return err
	})
	return out, err
}

// ListPrincipals implements store.PrincipalStore.
func (s *Store) ListPrincipals(ctx context.Context) ([]store.Principal, error) {
	return collect(ctx, s.r, "list principals", scanPrincipal, `SELECT `+principalCols+` FROM studio_principals ORDER BY name`)
}

// SetPrincipalRole implements store.PrincipalStore.
func (s *Store) SetPrincipalRole(ctx context.Context, p store.SetPrincipalRoleParams) (store.Principal, error) {
	if !p.Role.Valid() {
		return store.Principal{}, protocol.Errorf(protocol.Validation, "unknown role %q", p.Role).With("field", "role")
	}
	var out store.Principal
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadPrincipal(ctx, tx, p.Ref, tx.locks.update)
		if err != nil {
			return err
		}
		if cur.DisabledAt != nil {
			return protocol.Errorf(protocol.Conflict, "principal %s is disabled", cur.Name)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_principals SET role = ? WHERE id = ?`, string(p.Role), cur.ID); err != nil {
			return fmt.Errorf("set role: %w", err)
		}
		tx.control(store.AccessChanged)
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = loadPrincipal(ctx, tx, cur.ID, "")
		return err
	})
	return out, err
}

// DisablePrincipal implements store.PrincipalStore.
func (s *Store) DisablePrincipal(ctx context.Context, p store.DisablePrincipalParams) (store.Principal, error) {
	var out store.Principal
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadPrincipal(ctx, tx, p.Ref, tx.locks.update)
		if err != nil {
			return err
		}
		if out = cur; cur.DisabledAt != nil {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_principals SET disabled_at = ? WHERE id = ?`, ts(p.Now), cur.ID); err != nil {
			return fmt.Errorf("disable principal: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_principal_tokens SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL`,
			ts(p.Now), cur.ID); err != nil {
			return fmt.Errorf("revoke tokens: %w", err)
		}
		tx.control(store.AccessChanged)
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = loadPrincipal(ctx, tx, cur.ID, "")
		return err
	})
	return out, err
}

func loadToken(ctx context.Context, q querier, id, lock string) (store.Token, error) {
	t, err := scanToken(q.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM studio_principal_tokens WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, notFound("token", id)
	}
	if err != nil {
		return t, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// CreateToken implements store.PrincipalStore.
func (s *Store) CreateToken(ctx context.Context, p store.CreateTokenParams) (store.Token, error) {
	var out store.Token
	err := s.txn(ctx, func(tx *writeTx) error {
		owner, err := loadPrincipal(ctx, tx, p.PrincipalID, tx.locks.keyShare)
		if err != nil {
			return err
		}
		if owner.DisabledAt != nil {
			return protocol.Errorf(protocol.Conflict, "principal %s is disabled", owner.Name)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM studio_principal_tokens WHERE token_hash = ?`, p.Hash).Scan(&n); err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if n > 0 {
			return protocol.Errorf(protocol.Conflict, "this token is stored already")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_principal_tokens (id, principal_id, token_hash, prefix, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, p.ID, owner.ID, p.Hash, p.Prefix, ts(p.Now), tsOrNil(p.ExpiresAt)); err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = loadToken(ctx, tx, p.ID, "")
		return err
	})
	return out, err
}

// ListTokens implements store.PrincipalStore.
func (s *Store) ListTokens(ctx context.Context, p store.ListTokensParams) ([]store.Token, error) {
	query := `SELECT ` + tokenCols + ` FROM studio_principal_tokens`
	var args []any
	if p.PrincipalID != "" {
		query += ` WHERE principal_id = ?`
		args = append(args, p.PrincipalID)
	}
	return collect(ctx, s.r, "list tokens", scanToken, query+` ORDER BY created_at DESC, id`, args...)
}

// RevokeToken implements store.PrincipalStore.
func (s *Store) RevokeToken(ctx context.Context, p store.RevokeTokenParams) (store.Token, error) {
	var out store.Token
	err := s.txn(ctx, func(tx *writeTx) error {
		cur, err := loadToken(ctx, tx, p.ID, tx.locks.update)
		if err != nil {
			return err
		}
		if out = cur; cur.RevokedAt != nil {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE studio_principal_tokens SET revoked_at = ? WHERE id = ?`, ts(p.Now), cur.ID); err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		tx.control(store.AccessChanged)
		if err := audit(ctx, tx, p.Audit); err != nil {
			return err
		}
		out, err = loadToken(ctx, tx, cur.ID, "")
		return err
	})
	return out, err
}

// Authenticate implements store.PrincipalStore. It reads the database on
// every call: a revocation committed by any process sharing it refuses
// the token from the next request on.
func (s *Store) Authenticate(ctx context.Context, p store.AuthenticateParams) (store.Principal, store.Token, error) {
	denied := protocol.Errorf(protocol.AuthRequired, "a valid bearer token is required")
	// One query: the token and its principal.
	var t store.Token
	var pr store.Principal
	var tCreated, pCreated float64
	var expires, revoked, used, disabled sql.NullFloat64
	var proxyUser sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT t.id, t.principal_id, t.token_hash, t.prefix, t.created_at, t.expires_at, t.revoked_at, t.last_used_at,
		p.id, p.name, p.role, p.origin, p.proxy_user, p.created_at, p.disabled_at
		FROM studio_principal_tokens t JOIN studio_principals p ON p.id = t.principal_id WHERE t.token_hash = ?`, p.Hash).Scan(
		&t.ID, &t.PrincipalID, &t.Hash, &t.Prefix, &tCreated, &expires, &revoked, &used,
		&pr.ID, &pr.Name, &pr.Role, &pr.Origin, &proxyUser, &pCreated, &disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Principal{}, store.Token{}, denied
	}
	if err != nil {
		return store.Principal{}, store.Token{}, fmt.Errorf("authenticate: %w", err)
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt, t.LastUsedAt = fromTS(tCreated), nullTS(expires), nullTS(revoked), nullTS(used)
	pr.CreatedAt, pr.DisabledAt, pr.ProxyUser = fromTS(pCreated), nullTS(disabled), proxyUser.String
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !p.Now.Before(*t.ExpiresAt)) || pr.DisabledAt != nil {
		return store.Principal{}, store.Token{}, denied
	}
	if t.LastUsedAt == nil || p.Now.Sub(*t.LastUsedAt) >= store.LastUsedGranularity {
		// Only where the record is stale, so concurrent requests of a
		// token write it once; a failure here does not refuse the request.
		err := s.txn(ctx, func(tx *writeTx) error {
			_, err := tx.ExecContext(ctx, `UPDATE studio_principal_tokens SET last_used_at = ?
				WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
				ts(p.Now), t.ID, ts(p.Now.Add(-store.LastUsedGranularity)))
			return err
		})
		if err == nil {
			now := p.Now
			t.LastUsedAt = &now
		}
	}
	return pr, t, nil
}
