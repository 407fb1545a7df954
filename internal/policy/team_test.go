package policy_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// teamEngine is the built-in policies with docs' example team file.
func teamEngine(t *testing.T, levels ...string) *policy.Engine {
	t.Helper()
	b, err := os.ReadFile("../../docs/examples/team-policy.cedar")
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(policy.Options{SecondApproverFor: levels, Files: []policy.File{{Name: "team-policy.cedar", Text: b}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func deleteIn(project, author string) policy.Proposal {
	return policy.Proposal{ID: "p", CommandType: "delete_schedule", Risk: protocol.RiskMutate, Impact: protocol.ImpactIrreversible,
		TargetKind: "schedule", Project: project, Author: author,
		Conversation: &policy.Conversation{ID: "c", Owner: author, Visibility: protocol.VisibilityTeam}}
}

// TestExampleTeamPolicies: docs' two example policies do what docs say.
func TestExampleTeamPolicies(t *testing.T) {
	t.Parallel()
	e := teamEngine(t)
	alice, bob := who("alice", protocol.RoleOperator), who("bob", protocol.RoleOperator)
	sre := who("sam", protocol.RoleOperator, "sre")
	for _, tc := range []struct {
		name string
		p    protocol.Principal
		a    policy.Action
		r    policy.Resource
		want policy.Effect
	}{
		{"a delete in prod, asked directly", alice, policy.RunCommand, policy.Proposal{ID: "delete_schedule", CommandType: "delete_schedule",
			Risk: protocol.RiskMutate, Impact: protocol.ImpactIrreversible, Project: "prod", Author: "alice"}, policy.EffectObligation},
		{"its author confirms it", alice, policy.Confirm, deleteIn("prod", "alice"), policy.EffectDeny},
		{"another operator outside sre", bob, policy.Confirm, deleteIn("prod", "alice"), policy.EffectDeny},
		{"a member of sre", sre, policy.Confirm, deleteIn("prod", "alice"), policy.EffectAllow},
		{"a delete elsewhere, by its author", alice, policy.Confirm, deleteIn("staging", "alice"), policy.EffectAllow},
		{"a launch in prod by an operator", alice, policy.RunCommand, policy.Proposal{ID: "launch_playbook", CommandType: "launch_playbook",
			Risk: protocol.RiskExecute, Project: "prod", Author: "alice"}, policy.EffectDeny},
		{"a launch in prod by an approver", who("anna", protocol.RoleApprover), policy.RunCommand, policy.Proposal{ID: "launch_playbook",
			CommandType: "launch_playbook", Risk: protocol.RiskExecute, Project: "prod", Author: "anna"}, policy.EffectAllow},
		{"an edit in prod by an operator", alice, policy.RunCommand, policy.Proposal{ID: "update_playbook", CommandType: "update_playbook",
			Risk: protocol.RiskMutate, Project: "prod", Author: "alice"}, policy.EffectAllow},
	} {
		if d := e.Decide(tc.p, tc.a, tc.r, http); d.Effect != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, d, d.Policies, tc.want)
		}
	}
	d := e.Decide(bob, policy.Confirm, deleteIn("prod", "alice"), http)
	if d.Reason != "group" || len(d.Policies) != 1 || d.Policies[0].ID != "prod-deletes-confirmed-by-sre" {
		t.Fatalf("bob's refusal says %v %v", d, d.Policies)
	}
}

// TestFourEyesLevelsAreOrdered: a level covers every level above it on
// its scale, for the confirm of one's own proposal and for a direct
// command alike; another principal's confirm is the second approval.
func TestFourEyesLevelsAreOrdered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level          string
		risk, impact   string
		needsTwoPeople bool
	}{
		{"destructive", protocol.RiskMutate, protocol.ImpactIrreversible, true},
		{"destructive", protocol.RiskExecute, protocol.ImpactDestructive, true},
		{"destructive", protocol.RiskMutate, "", false},
		{"irreversible", protocol.RiskExecute, protocol.ImpactDestructive, false},
		{"mutate", protocol.RiskExecute, "", true},
		{"execute", protocol.RiskAdmin, "", true},
		{"execute", protocol.RiskMutate, protocol.ImpactIrreversible, false},
		{"admin", protocol.RiskExecute, "", false},
	} {
		e, err := policy.New(policy.Options{SecondApproverFor: []string{tc.level}})
		if err != nil {
			t.Fatal(err)
		}
		p := who("alice", protocol.RoleAdmin)
		own := policy.Proposal{ID: "p", CommandType: "c", Risk: tc.risk, Impact: tc.impact, Author: "alice"}
		direct := e.Decide(p, policy.RunCommand, own, http)
		confirm := e.Decide(p, policy.Confirm, own, http)
		other := own
		other.Author = "bob"
		if tc.needsTwoPeople != (direct.Effect == policy.EffectObligation) || tc.needsTwoPeople == confirm.Allowed() ||
			!e.Decide(p, policy.Confirm, other, http).Allowed() {
			t.Errorf("--second-approver-for %s, risk %s impact %q: direct %v, own confirm %v", tc.level, tc.risk, tc.impact, direct, confirm)
		}
	}
}

// TestGateRecordsDenialsRateLimited: a gate records each refusal until a
// principal's burst is spent, then counts the ones it leaves out into the
// next one it records; another principal has its own budget; an allow is
// never recorded.
func TestGateRecordsDenialsRateLimited(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []policy.Denial
	now := time.Unix(1_800_000_000, 0)
	g := policy.NewGate(policy.GateConfig{DenialsPerMinute: 6, DenialBurst: 2, Now: func() time.Time { return now },
		Record: func(_ context.Context, d policy.Denial) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d)
			return nil
		}})
	vic, eve := who("vic", protocol.RoleViewer), who("eve", protocol.RoleViewer)
	ctx := t.Context()
	for range 7 {
		g.Decide(ctx, vic, policy.ManagePrincipals, policy.Studio{}, http)
	}
	g.Decide(ctx, vic, policy.ReadStudio, policy.Studio{}, http) // allowed
	g.Decide(ctx, eve, policy.ManagePrincipals, policy.Studio{}, http)
	now = now.Add(10 * time.Second) // one more denial's worth
	g.Decide(ctx, vic, policy.ManageWebhooks, policy.Studio{}, http)
	if len(got) != 4 || got[0].Principal.Name != "vic" || got[2].Principal.Name != "eve" {
		t.Fatalf("recorded %+v", got)
	}
	last := got[3]
	if last.Suppressed != 5 || last.Action != policy.ManageWebhooks || last.Decision.Reason != policy.ReasonRole || last.Decision.Needed != protocol.RoleAdmin {
		t.Fatalf("the last recorded denial %+v", last)
	}
}

// TestAskWithoutAPrincipalIsTheDaemons: work without a principal (the
// sweeper, the scheduler) is not a request and is allowed; with one, the
// gate the context carries decides.
func TestAskWithoutAPrincipalIsTheDaemons(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if err := policy.Ask(ctx, policy.ManagePrincipals, policy.Studio{}); err != nil {
		t.Fatal(err)
	}
	ctx = protocol.WithPrincipal(ctx, who("vic", protocol.RoleViewer))
	if err := policy.Ask(ctx, policy.ManagePrincipals, policy.Studio{}); !protocol.IsCode(err, protocol.Denied) {
		t.Fatalf("a viewer managing principals: %v", err)
	}
	if policy.May(ctx, policy.ReadConversation, policy.Conversation{ID: "c", Owner: "bob", Visibility: protocol.VisibilityPrivate}) {
		t.Fatal("a viewer may read bob's private conversation")
	}
}
