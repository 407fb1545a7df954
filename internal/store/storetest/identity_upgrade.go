package storetest

import (
	"context"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// IdentityUpgradeFrom is the schema version before principals had an
// origin, a look-alike key and a proxy link.
const IdentityUpgradeFrom = 11

// ExerciseIdentityUpgrade checks the upgrade of principals to origins on
// a backend: s is migrated to IdentityUpgradeFrom, exec runs SQL on it
// (no placeholders: the dialects differ) and migrate finishes the
// migration. A principal whose creation the sign-in proxy audited
// becomes a proxy principal; every other one (the owner, an admin's, one
// the proxy only changed the role of) stays local; names are kept as
// they are, without a look-alike key, and new keys are unique.
func ExerciseIdentityUpgrade(t *testing.T, s store.Store, exec func(ctx context.Context, query string) error, migrate func(ctx context.Context) error) {
	t.Helper()
	ctx := t.Context()
	for _, q := range []string{
		`INSERT INTO studio_principals (id, name, role, created_at) VALUES ('p-owner', 'owner', 'admin', 1)`,
		`INSERT INTO studio_principals (id, name, role, created_at) VALUES ('p-alice', 'alice', 'operator', 2)`,
		`INSERT INTO studio_principals (id, name, role, created_at) VALUES ('p-dana', 'dana@corp', 'viewer', 3)`,
		`INSERT INTO admin_events (created_at, actor, action, target_id, details) VALUES (2, 'owner', 'studio.principal.created', 'p-alice', '{}')`,
		`INSERT INTO admin_events (created_at, actor, action, target_id, details) VALUES (3, 'studio_auth_proxy', 'studio.principal.created', 'p-dana', '{}')`,
		// The proxy demoted the owner once (X-Forwarded-User: Owner): it stays local.
		`INSERT INTO admin_events (created_at, actor, action, target_id, details) VALUES (4, 'studio_auth_proxy', 'studio.principal.role_changed', 'p-owner', '{}')`,
	} {
		if err := exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	want := map[string]protocol.Origin{"owner": protocol.OriginLocal, "alice": protocol.OriginLocal, "dana@corp": protocol.OriginProxy}
	ps, err := s.ListPrincipals(ctx)
	if err != nil || len(ps) != len(want) {
		t.Fatalf("principals after the upgrade: %+v, %v", ps, err)
	}
	for _, p := range ps {
		if p.Origin != want[p.Name] || p.ProxyUser != "" {
			t.Errorf("%s: origin %q, link %q; want %q, none", p.Name, p.Origin, p.ProxyUser, want[p.Name])
		}
	}
	if p, err := s.ProxyPrincipal(ctx, "dana@corp"); err != nil || p.ID != "p-dana" || p.Origin != protocol.OriginProxy {
		t.Fatalf("the proxy's dana after the upgrade: %+v, %v", p, err)
	}
	// Old names have no key: a new one never collides with them here (the
	// daemon compares it with them), and new keys are unique.
	for _, name := range []string{"bob", "bobl"} {
		_, err := s.CreatePrincipal(ctx, store.CreatePrincipalParams{ID: "p-" + name, Name: name, NameKey: "bobl", Role: protocol.RoleViewer, Now: Epoch})
		if name == "bob" && err != nil {
			t.Fatal(err)
		}
		if name == "bobl" && !protocol.IsCode(err, protocol.Conflict) {
			t.Fatalf("a second principal with the key bobl: %v, want conflict", err)
		}
	}
}
