package main

import (
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// TestProcessClusterRevocation: three daemons on one PostgreSQL database
// share the owner (their one token file, bootstrapped by whichever starts
// first); a token made on one works on all, and once it is revoked on
// another, the very next request with it is refused by every daemon.
func TestProcessClusterRevocation(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	a, b := c.ds[0], c.ds[1]
	ctx := testCtx(t)
	if n := c.count(ctx, `SELECT COUNT(*) FROM studio_principals WHERE name = 'owner'`); n != 1 {
		t.Fatalf("%d owners after three concurrent starts", n)
	}
	if _, err := a.client.CreatePrincipal(ctx, "bob", protocol.RoleViewer); err != nil {
		t.Fatal(err)
	}
	tok, err := a.client.CreateToken(ctx, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	bobs := make([]*apiclient.Client, len(c.ds))
	for i, d := range c.ds {
		bobs[i] = apiclient.New(d.URL, tok.Token, nil)
		if who, err := bobs[i].Whoami(ctx); err != nil || who.Name != "bob" {
			t.Fatalf("daemon %d: whoami = %+v, %v", i, who, err)
		}
	}
	start := time.Now()
	if _, err := b.client.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	for i, cl := range bobs {
		if _, err := cl.Whoami(ctx); !protocol.IsCode(err, protocol.AuthRequired) {
			t.Fatalf("daemon %d after the revocation: %v, want auth_required", i, err)
		}
	}
	t.Logf("revoked on one daemon; refused by all three %v after the revocation was sent", time.Since(start))
}
