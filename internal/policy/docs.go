package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/studio/operator/internal/protocol"
)

// What docs print of a policy set, computed by deciding: the role table
// is what Decide answers, not a second copy of the rules.

// Case is one row of the role table: an action on a resource.
type Case struct {
	Title    string
	Action   Action
	Resource func(principal string) Resource
	// Risk is the command's risk, for the command actions' rows.
	Risk string
	// Special marks a row beside the action's typical ones (another's
	// private conversation, one's own proposal): LeastRole leaves it out.
	Special bool
}

// Cases are the role table's rows: every action a door asks, on the
// principal's own team conversation, and the command actions by risk.
func Cases() []Case {
	var out []Case
	for _, spec := range Actions {
		switch {
		case spec.Action == ActAlone:
		case spec.On == KindStudio:
			out = append(out, Case{Title: string(spec.Action), Action: spec.Action, Resource: func(string) Resource { return Studio{} }})
		case spec.On == KindConversation:
			out = append(out, Case{Title: string(spec.Action), Action: spec.Action, Resource: func(p string) Resource {
				return Conversation{ID: "c", Owner: p, Visibility: protocol.VisibilityTeam}
			}})
		case spec.Action == Confirm:
			for _, risk := range RiskLevels {
				out = append(out, Case{Title: fmt.Sprintf("confirm another's proposal, risk %s", risk), Action: Confirm,
					Resource: proposalOf(risk, false), Risk: risk})
			}
			out = append(out, Case{Title: "confirm one's own proposal, risk admin", Action: Confirm,
				Resource: proposalOf(protocol.RiskAdmin, true), Risk: protocol.RiskAdmin, Special: true},
				Case{Title: "confirm one's own proposal, risk mutate, impact irreversible (a delete)", Action: Confirm,
					Resource: withImpact(proposalOf(protocol.RiskMutate, true), protocol.ImpactIrreversible), Special: true})
		case spec.Action == RunCommand:
			for _, risk := range RiskLevels {
				out = append(out, Case{Title: fmt.Sprintf("run_command, risk %s", risk), Action: RunCommand, Resource: directOf(risk), Risk: risk})
			}
			out = append(out, Case{Title: "run_command, risk mutate, impact irreversible (a delete)", Action: RunCommand,
				Resource: withImpact(directOf(protocol.RiskMutate), protocol.ImpactIrreversible), Special: true})
		default:
			out = append(out, Case{Title: string(spec.Action), Action: spec.Action, Resource: proposalOf(protocol.RiskMutate, false)})
		}
	}
	out = append(out,
		Case{Title: "read another's private conversation", Action: ReadConversation, Special: true, Resource: func(string) Resource {
			return Conversation{ID: "c", Owner: "someone-else", Visibility: protocol.VisibilityPrivate}
		}},
		Case{Title: "set_visibility of another's conversation", Action: SetVisibility, Special: true, Resource: func(string) Resource {
			return Conversation{ID: "c", Owner: "someone-else", Visibility: protocol.VisibilityTeam}
		}})
	return out
}

func proposalOf(risk string, own bool) func(string) Resource {
	return func(p string) Resource {
		author := "someone-else"
		if own {
			author = p
		}
		return Proposal{ID: "p", CommandType: "c", Risk: risk, Author: author,
			Conversation: &Conversation{ID: "c", Owner: author, Visibility: protocol.VisibilityTeam}}
	}
}

func withImpact(of func(string) Resource, impact string) func(string) Resource {
	return func(p string) Resource {
		r := of(p).(Proposal)
		r.Impact = impact
		return r
	}
}

func directOf(risk string) func(string) Resource {
	return func(p string) Resource { return Proposal{ID: "c", CommandType: "c", Risk: risk, Author: p} }
}

// cell is one decision as the table shows it.
func cell(d Decision) string {
	switch d.Effect {
	case EffectAllow:
		return "yes"
	case EffectObligation:
		return "with a second approver"
	}
	return "—"
}

// RoleTable is the role table of e as Markdown: each case, each role.
func RoleTable(e *Engine) string {
	var b strings.Builder
	b.WriteString("| action |")
	for _, r := range protocol.Roles {
		fmt.Fprintf(&b, " %s |", r)
	}
	b.WriteString("\n|---|")
	for range protocol.Roles {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, c := range Cases() {
		fmt.Fprintf(&b, "| %s |", c.Title)
		for _, r := range protocol.Roles {
			p := protocol.Principal{ID: "p", Name: "p", Role: r}
			fmt.Fprintf(&b, " %s |", cell(e.Decide(p, c.Action, c.Resource(p.Name), Context{Door: DoorHTTP})))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// LeastRole says which roles the action needs on its typical resources:
// "viewer", or for a command action by risk, "mutate, execute: operator;
// admin: approver with a second approver, admin".
func LeastRole(e *Engine, a Action) string {
	type group struct{ risks, roles []string }
	var groups []group
	for _, c := range Cases() {
		if c.Action != a || c.Special {
			continue
		}
		var roles []string
		for _, r := range protocol.Roles {
			p := protocol.Principal{ID: "p", Name: "p", Role: r}
			d := e.Decide(p, c.Action, c.Resource(p.Name), Context{Door: DoorHTTP})
			if d.Effect == EffectObligation {
				roles = append(roles, string(r)+" with a second approver")
				continue
			}
			if d.Effect == EffectAllow {
				roles = append(roles, string(r))
				break
			}
		}
		if len(roles) == 0 {
			roles = []string{"none"}
		}
		if n := len(groups); n > 0 && slices.Equal(groups[n-1].roles, roles) {
			groups[n-1].risks = append(groups[n-1].risks, c.Risk)
			continue
		}
		groups = append(groups, group{risks: []string{c.Risk}, roles: roles})
	}
	if len(groups) == 1 {
		return strings.Join(groups[0].roles, ", ")
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%s: %s", strings.Join(g.risks, ", "), strings.Join(g.roles, ", "))
	}
	return strings.Join(parts, "; ")
}
