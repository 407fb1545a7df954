package policy

import (
	"fmt"
	"strings"
)

// BuiltinFile names the built-in policies in positions and explanations.
const BuiltinFile = "builtin.cedar"

// builtin is the documented role table as Cedar: each role is permitted
// what the roles below it are (principal in Role::"agent" holds for every
// role from agent up), and forbids narrow that down with a reason. A
// team's file may add permits (granting more) and forbids (taking away);
// a forbid always wins.
const builtin = `// Every principal reads: the cockpit, health, the audit trail, the
// conversations and proposals it may see, and streams them.
@id("viewer-reads")
permit (
  principal in Role::"viewer",
  action in [Action::"read_studio", Action::"read_health", Action::"read_audit",
    Action::"read_metrics", Action::"whoami", Action::"use_mcp",
    Action::"list_conversations", Action::"read_conversation",
    Action::"mint_ticket", Action::"redeem_ticket", Action::"read_proposal"],
  resource
);

// An agent (a program) converses, and so proposes; it never decides.
@id("agent-converses")
permit (
  principal in Role::"agent",
  action in [Action::"create_conversation", Action::"converse",
    Action::"update_conversation", Action::"cancel_turn", Action::"propose"],
  resource
);

// The owner of a conversation (or an admin) makes it private or team.
@id("owner-sets-visibility")
permit (principal in Role::"agent", action == Action::"set_visibility", resource);

@id("only-owner-sets-visibility")
@reason("owner")
forbid (principal, action == Action::"set_visibility", resource is Conversation)
when { resource.owner != principal }
unless { principal in Role::"admin" };

// An operator acknowledges effects for the cockpit, deletes and restores
// conversations, denies and amends proposals.
@id("operator-decides")
permit (
  principal in Role::"operator",
  action in [Action::"ack_effect", Action::"delete_conversation",
    Action::"restore_conversation", Action::"deny", Action::"amend"],
  resource
);

// An operator runs and confirms commands of risk mutate and execute.
@id("operator-runs-commands")
permit (
  principal in Role::"operator",
  action in [Action::"run_command", Action::"confirm"],
  resource is Proposal
)
when { !resource.atLeast.contains("admin") };

{{admin-risk-rule}}
@id("approver-runs-admin-commands")
permit (
  principal in Role::"approver",
  action in [Action::"run_command", Action::"confirm"],
  resource is Proposal
)
when { resource.atLeast.contains("admin") };

@id("admin-risk-alone-needs-admin")
@reason("second_approver_required")
forbid (principal, action == Action::"act_alone", resource is Proposal)
when { resource.atLeast.contains("admin") }
unless { principal in Role::"admin" };

// Anyone who may run or confirm a command may do it alone, unless a
// forbid (four-eyes) says a second principal must confirm it.
@id("act-alone")
permit (principal, action == Action::"act_alone", resource);

// Admins manage principals, tokens and webhooks, and have decisions
// explained.
@id("admin-manages")
permit (
  principal in Role::"admin",
  action in [Action::"manage_principals", Action::"manage_webhooks", Action::"explain_policy"],
  resource
);

// Another principal's private conversation, and what was proposed in it,
// is its owner's and the admins': everyone else is refused everything on
// it, and the doors answer not_found, as for one that does not exist.
@id("private-conversations")
@reason("not_visible")
forbid (principal, action, resource is Conversation)
when { resource.visibility == "private" && resource.owner != principal }
unless { principal in Role::"admin" };

@id("private-proposals")
@reason("not_visible")
forbid (principal, action, resource is Proposal)
when {
  resource has conversation &&
  resource.conversation.visibility == "private" &&
  resource.conversation.owner != principal
}
unless { principal in Role::"admin" };
`

// AdminRiskRule is the one rule for commands of risk admin, in words: the
// built-in policies' comment, and what the docs print.
const AdminRiskRule = "A command of risk admin (maintenance, reconciling a proposal) follows one rule " +
	"whichever door it comes through: an approver may run or confirm one, but never alone. Its own " +
	"proposal waits for another approver's confirmation, and its direct command is sent for approval: " +
	"it becomes a pending proposal another approver confirms. An admin may run one alone."

// commentLines is text as Cedar comment lines of at most 72 columns.
func commentLines(text string) string {
	var lines []string
	line := "//"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 72 {
			lines = append(lines, line)
			line = "//"
		}
		line += " " + w
	}
	return strings.Join(append(lines, line), "\n")
}

// fourEyes is the policy --second-approver-for adds: a command of those
// levels (or above) needs a second principal.
func fourEyes(levels []string) string {
	if len(levels) == 0 {
		return ""
	}
	quoted := make([]string, len(levels))
	for i, l := range levels {
		quoted[i] = fmt.Sprintf("%q", l)
	}
	return fmt.Sprintf(`
// Four-eyes (--second-approver-for %s): a command of these levels, or
// above, needs a second principal — its author cannot confirm it, and a
// direct command of it is sent for approval (a second approver confirms).
@id("second-approver-for")
@reason("second_approver_required")
forbid (principal, action == Action::"act_alone", resource is Proposal)
when { resource.atLeast.containsAny([%s]) };
`, strings.Join(levels, ","), strings.Join(quoted, ", "))
}

// BuiltinText is the built-in policy set for --second-approver-for levels.
func BuiltinText(levels []string) string {
	return strings.Replace(builtin, "{{admin-risk-rule}}", commentLines(AdminRiskRule), 1) + fourEyes(levels)
}
