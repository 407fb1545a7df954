package policy_test

import (
	"strings"
	"testing"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

func who(name string, role protocol.Role, groups ...string) protocol.Principal {
	return protocol.Principal{ID: name, Name: name, Role: role, Groups: groups}
}

var http = policy.Context{Door: policy.DoorHTTP}

// TestBuiltinValidates: the built-in set validates against the schema,
// alone and with every four-eyes level.
func TestBuiltinValidates(t *testing.T) {
	t.Parallel()
	if _, err := policy.New(policy.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.New(policy.Options{SecondApproverFor: policy.Levels()}); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.New(policy.Options{SecondApproverFor: []string{"dangerous"}}); err == nil {
		t.Fatal("an unknown level was accepted")
	}
}

// TestRoleTable is the documented role table, decided by the built-in
// policies: each role may what the roles below it may, and no more.
func TestRoleTable(t *testing.T) {
	t.Parallel()
	e := policy.Default()
	least := map[policy.Action]protocol.Role{
		policy.ReadStudio: protocol.RoleViewer, policy.ReadHealth: protocol.RoleViewer, policy.ReadAudit: protocol.RoleViewer,
		policy.ReadMetrics: protocol.RoleViewer, policy.Whoami: protocol.RoleViewer, policy.UseMCP: protocol.RoleViewer,
		policy.ListConversations: protocol.RoleViewer, policy.CreateConversation: protocol.RoleAgent,
		policy.ManagePrincipals: protocol.RoleAdmin, policy.ManageWebhooks: protocol.RoleAdmin, policy.ExplainPolicy: protocol.RoleAdmin,
		policy.ReadConversation: protocol.RoleViewer, policy.MintTicket: protocol.RoleViewer, policy.RedeemTicket: protocol.RoleViewer,
		policy.Converse: protocol.RoleAgent, policy.UpdateConversation: protocol.RoleAgent, policy.SetVisibility: protocol.RoleAgent,
		policy.DeleteConversation: protocol.RoleOperator, policy.RestoreConversation: protocol.RoleOperator,
		policy.CancelTurn: protocol.RoleAgent, policy.AcknowledgeEffect: protocol.RoleOperator,
		policy.ReadProposal: protocol.RoleViewer, policy.Propose: protocol.RoleAgent, policy.Deny: protocol.RoleOperator,
		policy.Amend: protocol.RoleOperator, policy.Confirm: protocol.RoleOperator, policy.RunCommand: protocol.RoleOperator,
	}
	for _, spec := range policy.Actions {
		if spec.Action == policy.ActAlone {
			continue
		}
		need, ok := least[spec.Action]
		if !ok {
			t.Errorf("action %s has no expected least role", spec.Action)
			continue
		}
		for _, role := range protocol.Roles {
			p := who("alice", role)
			var r policy.Resource
			switch spec.On {
			case policy.KindStudio:
				r = policy.Studio{}
			case policy.KindConversation:
				r = policy.Conversation{ID: "c1", Owner: "alice", Visibility: protocol.VisibilityTeam}
			case policy.KindProposal:
				r = policy.Proposal{ID: "p1", CommandType: "update_playbook", Risk: protocol.RiskMutate, Author: "bob",
					Conversation: &policy.Conversation{ID: "c1", Owner: "bob", Visibility: protocol.VisibilityTeam}}
			}
			d := e.Decide(p, spec.Action, r, http)
			if want := role.Allows(need); d.Allowed() != want {
				t.Errorf("%s as %s: %v, want allowed=%v", spec.Action, role, d, want)
			}
			if !d.Allowed() && (d.Reason != policy.ReasonRole || d.Needed != need) {
				t.Errorf("%s as %s: %v, want a deny for the role naming %s", spec.Action, role, d, need)
			}
		}
	}
}

// TestInvalidPolicyNamesLineAndReason: a team policy with an unknown
// attribute, or a syntax error, is refused with its file, line and reason.
func TestInvalidPolicyNamesLineAndReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{"// prod\n\n@id(\"prod\")\nforbid (principal, action == Action::\"confirm\", resource is Proposal)\nwhen { resource.projet == \"prod\" };\n",
			"team.cedar:3: policy \"prod\": attribute `projet` on entity type `Proposal` not found"},
		{"permit (principal, action == Action::\"launch\", resource);\n", "team.cedar:1: policy \"team.cedar:1\": "},
		{"\npermit (principal, action, resource) when { resource.x == };\n", "team.cedar:2:"},
		{"@id(\"act-alone\")\npermit (principal, action, resource);\n", `policy id "act-alone" is already used at builtin.cedar:`},
	} {
		_, err := policy.New(policy.Options{Files: []policy.File{{Name: "team.cedar", Text: []byte(tc.text)}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}
