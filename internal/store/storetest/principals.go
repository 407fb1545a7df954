package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ExercisePrincipals runs the conformance suite of store.PrincipalStore:
// names are unique for ever, tokens are found by hash only while they are
// neither revoked nor expired and their principal is enabled, each change
// appends its audit row in its transaction; turns and proposals record
// who submitted and who decided them.
func ExercisePrincipals(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := subtests(t, open)
	run("CreateGetList", testPrincipalCreateGetList)
	run("NameTakenForEver", testPrincipalNameTaken)
	run("InvalidRole", testPrincipalInvalidRole)
	run("SetRole", testPrincipalSetRole)
	run("Authenticate", testTokenAuthenticate)
	run("Authenticate/ExpiredRevokedUnknown", testTokenRefused)
	run("Disable", testPrincipalDisable)
	run("TokenDuplicateHash", testTokenDuplicateHash)
	run("SubmittedAndDecidedBy", testSubmittedDecidedBy)
	run("Origin", testPrincipalOrigin)
	run("NameKeyTaken", testPrincipalNameKeyTaken)
	run("NameKeyConcurrent", testPrincipalNameKeyConcurrent)
	run("ProxyLink", testPrincipalProxyLink)
}

func (f *fixture) principal(name string, role protocol.Role) store.Principal {
	f.t.Helper()
	p, err := f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: name, Role: role, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreatePrincipal(%s): %v", name, err)
	}
	return p
}

func (f *fixture) token(principalID string, expires *time.Time) store.Token {
	f.t.Helper()
	tk, err := f.s.CreateToken(f.ctx, store.CreateTokenParams{ID: newID(), PrincipalID: principalID, Hash: newID(), Prefix: "stu_ab12",
		ExpiresAt: expires, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("CreateToken: %v", err)
	}
	return tk
}

func principalAudit(action, target string, now time.Time) *store.AppendAdminEventParams {
	return &store.AppendAdminEventParams{Actor: "owner", Action: action, TargetID: ptr(target), Now: now}
}

func testPrincipalCreateGetList(t *testing.T, f *fixture) {
	now := f.tick()
	id := newID()
	p, err := f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: id, Name: "alice", Role: protocol.RoleOperator, Now: now,
		Audit: principalAudit("studio.principal.created", id, now)})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != id || p.Name != "alice" || p.Role != protocol.RoleOperator || !p.CreatedAt.Equal(now) || p.DisabledAt != nil {
		t.Fatalf("created %+v", p)
	}
	for _, ref := range []string{id, "alice"} {
		got, err := f.s.GetPrincipal(f.ctx, ref)
		if err != nil || got.ID != id {
			t.Fatalf("GetPrincipal(%s) = %+v, %v", ref, got, err)
		}
	}
	_, err = f.s.GetPrincipal(f.ctx, "bob")
	wantCode(t, err, protocol.NotFound)
	f.principal("bob", protocol.RoleViewer)
	ps, err := f.s.ListPrincipals(f.ctx)
	if err != nil || len(ps) != 2 || ps[0].Name != "alice" || ps[1].Name != "bob" {
		t.Fatalf("ListPrincipals = %+v, %v", ps, err)
	}
	if es := f.audits(id); len(es) != 1 || es[0].Action != "studio.principal.created" || es[0].Actor != "owner" {
		t.Fatalf("audit rows %+v", es)
	}
}

func testPrincipalNameTaken(t *testing.T, f *fixture) {
	p := f.principal("alice", protocol.RoleAdmin)
	if _, err := f.s.DisablePrincipal(f.ctx, store.DisablePrincipalParams{Ref: p.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: "alice", Role: protocol.RoleViewer, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
}

func testPrincipalInvalidRole(t *testing.T, f *fixture) {
	_, err := f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: "x", Role: "root", Now: f.tick()})
	wantCode(t, err, protocol.Validation)
	p := f.principal("y", protocol.RoleViewer)
	_, err = f.s.SetPrincipalRole(f.ctx, store.SetPrincipalRoleParams{Ref: p.ID, Role: "", Now: f.tick()})
	wantCode(t, err, protocol.Validation)
}

func testPrincipalSetRole(t *testing.T, f *fixture) {
	p := f.principal("ci-bot", protocol.RoleAgent)
	now := f.tick()
	got, err := f.s.SetPrincipalRole(f.ctx, store.SetPrincipalRoleParams{Ref: "ci-bot", Role: protocol.RoleApprover, Now: now,
		Audit: principalAudit("studio.principal.role_changed", p.ID, now)})
	if err != nil || got.Role != protocol.RoleApprover {
		t.Fatalf("SetPrincipalRole = %+v, %v", got, err)
	}
	tk := f.token(p.ID, nil)
	who, _, err := f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: tk.Hash, Now: f.tick()})
	if err != nil || who.Role != protocol.RoleApprover {
		t.Fatalf("Authenticate after the role change = %+v, %v", who, err)
	}
	_, err = f.s.SetPrincipalRole(f.ctx, store.SetPrincipalRoleParams{Ref: "nobody", Role: protocol.RoleViewer, Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testTokenAuthenticate(t *testing.T, f *fixture) {
	p := f.principal("alice", protocol.RoleOperator)
	exp := f.clock.Now().Add(time.Hour)
	tk := f.token(p.ID, &exp)
	if tk.PrincipalID != p.ID || tk.Prefix != "stu_ab12" || !sameTime(tk.ExpiresAt, &exp) || tk.LastUsedAt != nil || tk.RevokedAt != nil {
		t.Fatalf("token %+v", tk)
	}
	now := f.tick()
	who, used, err := f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: tk.Hash, Now: now})
	if err != nil || who.ID != p.ID || used.ID != tk.ID || !sameTime(used.LastUsedAt, &now) {
		t.Fatalf("Authenticate = %+v, %+v, %v", who, used, err)
	}
	// Within a minute the record stands; after it, it moves.
	if _, _, err := f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: tk.Hash, Now: now.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	ts, err := f.s.ListTokens(f.ctx, store.ListTokensParams{PrincipalID: p.ID})
	if err != nil || len(ts) != 1 || !sameTime(ts[0].LastUsedAt, &now) {
		t.Fatalf("ListTokens = %+v, %v", ts, err)
	}
	later := now.Add(2 * time.Minute)
	if _, _, err := f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: tk.Hash, Now: later}); err != nil {
		t.Fatal(err)
	}
	ts, _ = f.s.ListTokens(f.ctx, store.ListTokensParams{})
	if len(ts) != 1 || !sameTime(ts[0].LastUsedAt, &later) {
		t.Fatalf("last used after two minutes = %+v", ts)
	}
}

func testTokenRefused(t *testing.T, f *fixture) {
	p := f.principal("alice", protocol.RoleOperator)
	exp := f.clock.Now().Add(time.Hour)
	expiring := f.token(p.ID, &exp)
	_, _, err := f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: expiring.Hash, Now: exp})
	wantCode(t, err, protocol.AuthRequired)

	revoked := f.token(p.ID, nil)
	now := f.tick()
	got, err := f.s.RevokeToken(f.ctx, store.RevokeTokenParams{ID: revoked.ID, Now: now, Audit: principalAudit("studio.token.revoked", revoked.ID, now)})
	if err != nil || !sameTime(got.RevokedAt, &now) {
		t.Fatalf("RevokeToken = %+v, %v", got, err)
	}
	again, err := f.s.RevokeToken(f.ctx, store.RevokeTokenParams{ID: revoked.ID, Now: f.tick()})
	if err != nil || !sameTime(again.RevokedAt, &now) {
		t.Fatalf("a second revoke = %+v, %v", again, err)
	}
	if es := f.audits(revoked.ID); len(es) != 1 {
		t.Fatalf("%d audit rows of the revocation, want 1", len(es))
	}
	_, _, err = f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: revoked.Hash, Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
	_, _, err = f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: newID(), Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
	_, err = f.s.RevokeToken(f.ctx, store.RevokeTokenParams{ID: newID(), Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testPrincipalDisable(t *testing.T, f *fixture) {
	p := f.principal("alice", protocol.RoleAdmin)
	tk := f.token(p.ID, nil)
	now := f.tick()
	got, err := f.s.DisablePrincipal(f.ctx, store.DisablePrincipalParams{Ref: "alice", Now: now})
	if err != nil || !sameTime(got.DisabledAt, &now) {
		t.Fatalf("DisablePrincipal = %+v, %v", got, err)
	}
	_, _, err = f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: tk.Hash, Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
	ts, _ := f.s.ListTokens(f.ctx, store.ListTokensParams{PrincipalID: p.ID})
	if len(ts) != 1 || !sameTime(ts[0].RevokedAt, &now) {
		t.Fatalf("the disabled principal's tokens %+v", ts)
	}
	_, err = f.s.CreateToken(f.ctx, store.CreateTokenParams{ID: newID(), PrincipalID: p.ID, Hash: newID(), Prefix: "stu_x", Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.SetPrincipalRole(f.ctx, store.SetPrincipalRoleParams{Ref: p.ID, Role: protocol.RoleViewer, Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
}

func testTokenDuplicateHash(t *testing.T, f *fixture) {
	p := f.principal("alice", protocol.RoleAdmin)
	tk := f.token(p.ID, nil)
	_, err := f.s.CreateToken(f.ctx, store.CreateTokenParams{ID: newID(), PrincipalID: p.ID, Hash: tk.Hash, Prefix: "stu_x", Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.CreateToken(f.ctx, store.CreateTokenParams{ID: newID(), PrincipalID: newID(), Hash: newID(), Prefix: "stu_x", Now: f.tick()})
	wantCode(t, err, protocol.NotFound)
}

func testSubmittedDecidedBy(t *testing.T, f *fixture) {
	c := f.conversation()
	sp := f.submitParams(c.ID, c.LastSequence())
	sp.SubmittedBy = "alice"
	tr, _, err := f.s.SubmitTurn(f.ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if tr.SubmittedBy != "alice" || f.turn(tr.RequestID).SubmittedBy != "alice" {
		t.Fatalf("turn submitted by %q", f.turn(tr.RequestID).SubmittedBy)
	}
	if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	a, b := f.propose(c.ID, tr.RequestID), f.propose(c.ID, tr.RequestID)
	if a.SubmittedBy != "alice" || a.DecidedBy != "" {
		t.Fatalf("proposal submitted by %q, decided by %q", a.SubmittedBy, a.DecidedBy)
	}
	now := f.tick()
	if _, err := f.s.ConfirmProposal(f.ctx, store.ConfirmProposalParams{ID: a.ID, Now: now, DecidedBy: "bob",
		Audit: proposalAudit(a.ID, protocol.DecisionConfirmed, now)}); err != nil {
		t.Fatal(err)
	}
	now = f.tick()
	if _, _, err := f.s.CloseProposal(f.ctx, store.CloseProposalParams{ID: b.ID, Status: store.ProposalCancelled, Now: now, DecidedBy: "carol",
		Audit: proposalAudit(b.ID, protocol.DecisionDenied, now)}); err != nil {
		t.Fatal(err)
	}
	if got := f.proposal(a.ID); got.DecidedBy != "bob" || got.SubmittedBy != "alice" {
		t.Fatalf("confirmed proposal: submitted by %q, decided by %q", got.SubmittedBy, got.DecidedBy)
	}
	if got := f.proposal(b.ID); got.DecidedBy != "carol" {
		t.Fatalf("denied proposal decided by %q", got.DecidedBy)
	}
}

// testPrincipalOrigin: a principal is local unless created as a proxy
// principal, and says so wherever it is read (tokens included).
func testPrincipalOrigin(t *testing.T, f *fixture) {
	local := f.principal("lena", protocol.RoleViewer)
	proxy, err := f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: "pia", Role: protocol.RoleViewer,
		Origin: protocol.OriginProxy, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if local.Origin != protocol.OriginLocal || proxy.Origin != protocol.OriginProxy {
		t.Fatalf("origins %q, %q", local.Origin, proxy.Origin)
	}
	tk := f.token(proxy.ID, nil)
	who, _, err := f.s.Authenticate(f.ctx, store.AuthenticateParams{Hash: tk.Hash, Now: f.tick()})
	if err != nil || who.Origin != protocol.OriginProxy || who.Wire().Origin != protocol.OriginProxy {
		t.Fatalf("Authenticate = %+v, %v", who, err)
	}
	if got, err := f.s.GetPrincipal(f.ctx, "pia"); err != nil || got.Origin != protocol.OriginProxy {
		t.Fatalf("GetPrincipal = %+v, %v", got, err)
	}
	_, err = f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: "x", Role: protocol.RoleViewer, Origin: "ldap", Now: f.tick()})
	wantCode(t, err, protocol.Validation)
}

// testPrincipalNameKeyTaken: a name key (the look-alike skeleton) is
// taken like a name, by disabled principals too; principals without a
// key (named before keys) never collide with each other.
func testPrincipalNameKeyTaken(t *testing.T, f *fixture) {
	create := func(name, key string) (store.Principal, error) {
		return f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: name, NameKey: key, Role: protocol.RoleViewer, Now: f.tick()})
	}
	modern, err := create("modern", "rnodern")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.DisablePrincipal(f.ctx, store.DisablePrincipalParams{Ref: modern.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err = create("rnodern", "rnodern")
	wantCode(t, err, protocol.Conflict)
	if protocol.ErrorOf(err).Details["reason"] != "confusable" || protocol.ErrorOf(err).Details["name"] != "modern" {
		t.Fatalf("look-alike conflict %+v; want reason confusable, name modern", err)
	}
	for _, name := range []string{"old1", "old2"} {
		if _, err := create(name, ""); err != nil {
			t.Fatalf("%s without a key: %v", name, err)
		}
	}
}

// testPrincipalNameKeyConcurrent: of two look-alike names created at
// once, one is created and the other is conflict, never both.
func testPrincipalNameKeyConcurrent(t *testing.T, f *fixture) {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"bob1", "bobl"} {
		wg.Go(func() {
			_, errs[i] = f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: name, NameKey: "bobl",
				Role: protocol.RoleViewer, Now: f.clock.Now()})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		if err == nil {
			created++
		} else {
			wantCode(t, err, protocol.Conflict)
		}
	}
	if created != 1 {
		t.Fatalf("created %d of two look-alikes: %v", created, errs)
	}
}

// testPrincipalProxyLink: a local principal is linked to a proxy user
// (audited, in the change's transaction) and found by it before any
// principal of that name; a proxy principal is never linked, a user is
// linked to one principal at most, a disabled principal not at all;
// unlinking ends it.
func testPrincipalProxyLink(t *testing.T, f *fixture) {
	alice := f.principal("alice", protocol.RoleOperator)
	proxyAlice, err := f.s.CreatePrincipal(f.ctx, store.CreatePrincipalParams{ID: newID(), Name: "alice@corp", Role: protocol.RoleViewer,
		Origin: protocol.OriginProxy, Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.s.ProxyPrincipal(f.ctx, "alice@corp"); err != nil || got.ID != proxyAlice.ID {
		t.Fatalf("ProxyPrincipal before the link = %+v, %v", got, err)
	}
	if got, err := f.s.ProxyPrincipal(f.ctx, "alice"); err != nil || got.ID != alice.ID || got.ProxyUser != "" {
		t.Fatalf("ProxyPrincipal(alice) by name = %+v, %v", got, err)
	}
	_, err = f.s.ProxyPrincipal(f.ctx, alice.ID) // an id is no user
	wantCode(t, err, protocol.NotFound)

	now := f.tick()
	linked, err := f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: "alice", ProxyUser: "alice@corp", Now: now,
		Audit: principalAudit("studio.principal.linked", alice.ID, now)})
	if err != nil || linked.ProxyUser != "alice@corp" || linked.Origin != protocol.OriginLocal {
		t.Fatalf("LinkProxyUser = %+v, %v", linked, err)
	}
	if got, err := f.s.ProxyPrincipal(f.ctx, "alice@corp"); err != nil || got.ID != alice.ID {
		t.Fatalf("ProxyPrincipal after the link = %+v, %v; want the linked alice first", got, err)
	}
	if es := f.audits(alice.ID); len(es) != 1 || es[0].Action != "studio.principal.linked" {
		t.Fatalf("audit rows %+v", es)
	}
	// Linking again changes nothing (and appends no row).
	if again, err := f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: alice.ID, ProxyUser: "alice@corp", Now: f.tick()}); err != nil || again.ProxyUser != "alice@corp" {
		t.Fatalf("link again = %+v, %v", again, err)
	}

	bob := f.principal("bob", protocol.RoleViewer)
	_, err = f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: bob.ID, ProxyUser: "alice@corp", Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: proxyAlice.ID, ProxyUser: "someone", Now: f.tick()})
	wantCode(t, err, protocol.Validation)
	if _, err := f.s.DisablePrincipal(f.ctx, store.DisablePrincipalParams{Ref: bob.ID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	_, err = f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: bob.ID, ProxyUser: "bob", Now: f.tick()})
	wantCode(t, err, protocol.Conflict)
	_, err = f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: "nobody", ProxyUser: "x", Now: f.tick()})
	wantCode(t, err, protocol.NotFound)

	unlinked, err := f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: alice.ID, Now: f.tick()})
	if err != nil || unlinked.ProxyUser != "" {
		t.Fatalf("unlink = %+v, %v", unlinked, err)
	}
	if got, err := f.s.ProxyPrincipal(f.ctx, "alice@corp"); err != nil || got.ID != proxyAlice.ID {
		t.Fatalf("ProxyPrincipal after the unlink = %+v, %v", got, err)
	}
	// The user is free for another principal now.
	if _, err := f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: "lisa", ProxyUser: "alice@corp", Now: f.tick()}); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("link to nobody: %v", err)
	}
	f.principal("lisa", protocol.RoleViewer)
	if got, err := f.s.LinkProxyUser(f.ctx, store.LinkProxyUserParams{Ref: "lisa", ProxyUser: "alice@corp", Now: f.tick()}); err != nil || got.ProxyUser != "alice@corp" {
		t.Fatalf("link to lisa = %+v, %v", got, err)
	}
}
