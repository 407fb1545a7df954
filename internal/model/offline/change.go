package offline

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/studio/operator/internal/model"
)

// Change intents: each looks up what it needs with read tools, then calls a
// command tool. The command becomes a proposal the operator confirms; its
// result arrives as the last tool result, and the answer reports it.

var (
	reLaunch    = regexp.MustCompile(`^(?:please\s+)?(?:launch|run|start|kick off|execute)\s+(?:the\s+)?([a-z0-9][a-z0-9._-]*)(?:\s+playbook)?(?:\s+(?:with input|with|on|for|against)\s+(.+))?$`)
	reCancelRun = regexp.MustCompile(`^(?:please\s+)?(?:cancel|stop|abort|kill)\s+(?:the\s+)?run\s+([0-9a-f-]{4,36})$`)
	reRetry     = regexp.MustCompile(`^(?:please\s+)?(?:retry|rerun|re-run|restart)\s+(?:the\s+)?(?:last|latest|most recent)\s+failed\s+run$`)
	reRetryID   = regexp.MustCompile(`^(?:please\s+)?(?:retry|rerun|re-run)\s+(?:the\s+)?run\s+([0-9a-f-]{4,36})$`)
	rePause     = regexp.MustCompile(`^(?:please\s+)?(pause|disable|stop|suspend|resume|enable|unpause|restart)\s+(?:the\s+)?([a-z0-9][a-z0-9._-]*)(?:\s+schedule)?$`)
	reDeleteSch = regexp.MustCompile(`^(?:please\s+)?(?:delete|remove)\s+(?:the\s+)?schedule\s+(?:named\s+|called\s+)?["']?([a-z0-9][a-z0-9._-]*)["']?$`)
	reCreatePB  = regexp.MustCompile(`^(?:please\s+)?(?:create|make|add)\s+(?:a\s+|new\s+)*playbook\s+(?:named|called)\s+["']?([a-z0-9][a-z0-9._-]*)["']?\s*(?:that|which|to|:)?\s*(.*)$`)
	reLaunchWF  = regexp.MustCompile(`^(?:please\s+)?(?:launch|run|start|kick off|execute)\s+(?:the\s+)?(?:workflow\s+(?:named\s+|called\s+)?["']?([a-z0-9][a-z0-9._-]*)["']?|([a-z0-9][a-z0-9._-]*)\s+workflow)$`)
	reDeleteWF  = regexp.MustCompile(`^(?:please\s+)?(?:delete|remove)\s+(?:the\s+)?(?:workflow\s+(?:named\s+|called\s+)?["']?([a-z0-9][a-z0-9._-]*)["']?|([a-z0-9][a-z0-9._-]*)\s+workflow)$`)
	reDeletePB  = regexp.MustCompile(`^(?:please\s+)?(?:delete|remove)\s+(?:the\s+)?(?:playbook\s+(?:named\s+|called\s+)?["']?([a-z0-9][a-z0-9._-]*)["']?|([a-z0-9][a-z0-9._-]*)\s+playbook)$`)
	// reAlters starts a request to remove or change something. One that no
	// change intent understood is refused in words: answering it with a
	// navigation or a read would pass a substitute off as what was asked.
	reAlters = regexp.MustCompile(`^(?:please\s+)?(?:can you\s+|could you\s+)?(delete|remove|drop|erase|destroy|purge|wipe|clear|rename|edit|update|modify|change|overwrite)\b`)
	reMaint  = regexp.MustCompile(`^(?:please\s+)?(vacuum|checkpoint|integrity[- ]check|check the integrity of)\b.*\b(database|db|statedb)\b|^(?:please\s+)?(vacuum)$`)
)

// parseChange maps a change asked for in words to its intent: one case per
// phrase, first match wins, so the order of the cases is the priority.
func parseChange(s string) intent {
	switch {
	case reLaunchWF.MatchString(s):
		name := firstOf(reLaunchWF.FindStringSubmatch(s)[1:])
		return propose{c: call("launch_workflow", map[string]any{"workflow": name}), what: "launch the workflow " + name + " (one run per step, in order)"}
	case reDeleteWF.MatchString(s):
		name := firstOf(reDeleteWF.FindStringSubmatch(s)[1:])
		return propose{c: call("delete_workflow", map[string]any{"workflow": name}), what: "delete the workflow " + name}
	case reDeletePB.MatchString(s):
		name := firstOf(reDeletePB.FindStringSubmatch(s)[1:])
		return propose{c: call("delete_playbook", map[string]any{"playbook": name}), what: "delete the playbook " + name}
	case reRetry.MatchString(s):
		return lookupThen{lookup: call("list_runs", map[string]any{"status": "failed", "limit": 1}),
			pick: func(v map[string]any) (model.ToolCall, string, bool) {
				runs := list(v, "runs")
				if len(runs) == 0 {
					return model.ToolCall{}, "There is no failed run to retry.", false
				}
				id := str(runs[0], "id")
				return call("retry_run", map[string]any{"run": id}), fmt.Sprintf("retry run `%s` of %s", shortID(id), str(runs[0], "playbook")), true
			}}
	case reRetryID.MatchString(s):
		return runByPrefix(reRetryID.FindStringSubmatch(s)[1], "retry_run", "retry", []string{"failed", "cancelled"})
	case reCancelRun.MatchString(s):
		return runByPrefix(reCancelRun.FindStringSubmatch(s)[1], "cancel_run", "cancel", []string{"running", "queued"})
	case reDeleteSch.MatchString(s):
		name := reDeleteSch.FindStringSubmatch(s)[1]
		return propose{c: call("delete_schedule", map[string]any{"schedule": name}), what: "delete the schedule " + name}
	case reCreatePB.MatchString(s):
		m := reCreatePB.FindStringSubmatch(s)
		what := strings.TrimSpace(m[2])
		if what == "" {
			return answer{"To create a playbook I need to know what it should do: \"create a playbook named X that …\"."}
		}
		desc := strings.ToUpper(what[:1]) + what[1:]
		return propose{c: call("create_playbook", map[string]any{"name": m[1], "description": clip(desc, 200),
			"prompt": desc + ".\n\nInput: {{input}}"}), what: "create the playbook " + m[1]}
	case reMaint.MatchString(s):
		action := "vacuum"
		if strings.Contains(s, "checkpoint") {
			action = "checkpoint"
		} else if strings.Contains(s, "integrity") {
			action = "integrity_check"
		}
		return propose{c: call("run_maintenance", map[string]any{"action": action}), what: "run " + action + " on the database"}
	case rePause.MatchString(s) && (strings.Contains(s, "schedule") || strings.Contains(s, "nightly") || strings.Contains(s, "daily") || strings.Contains(s, "hourly")):
		m := rePause.FindStringSubmatch(s)
		enable := m[1] == "resume" || m[1] == "enable" || m[1] == "unpause" || m[1] == "restart"
		verb := map[bool]string{true: "resume", false: "pause"}[enable]
		word := m[2]
		return lookupThen{lookup: call("list_schedules", map[string]any{"query": word}),
			pick: func(v map[string]any) (model.ToolCall, string, bool) {
				ss := list(v, "schedules")
				if len(ss) == 0 {
					return model.ToolCall{}, fmt.Sprintf("I found no schedule matching %q.", word), false
				}
				if len(ss) > 1 {
					return model.ToolCall{}, fmt.Sprintf("Several schedules match %q (%s); say which one.", word, joinNames(ss)), false
				}
				name := str(ss[0], "name")
				// A command that would change nothing is answered, not
				// proposed: confirming it would report a change that did
				// not happen.
				if on, known := ss[0]["enabled"].(bool); known && on == enable {
					state := map[bool]string{true: "enabled", false: "paused"}[enable]
					return model.ToolCall{}, fmt.Sprintf("%s is already %s, so there is nothing to %s.", name, state, verb), false
				}
				return call("set_schedule_enabled", map[string]any{"schedule": name, "enabled": enable}), verb + " the schedule " + name, true
			}}
	case reLaunch.MatchString(s) && !notPlaybookWords[reLaunch.FindStringSubmatch(s)[1]]:
		m := reLaunch.FindStringSubmatch(s)
		word, input := m[1], strings.TrimSpace(m[2])
		return lookupThen{lookup: call("list_playbooks", map[string]any{"query": word}),
			pick: func(v map[string]any) (model.ToolCall, string, bool) {
				ps := list(v, "playbooks")
				if len(ps) == 0 {
					return model.ToolCall{}, fmt.Sprintf("I found no playbook matching %q. \"list playbooks\" shows what exists.", word), false
				}
				if len(ps) > 1 && str(ps[0], "name") != word {
					return model.ToolCall{}, fmt.Sprintf("Several playbooks match %q (%s); say which one.", word, joinNames(ps)), false
				}
				pb := ps[0]
				args := map[string]any{"playbook": str(pb, "name")}
				if input != "" {
					args["input"] = input
					// A single required argument without a default takes the input.
					var required []string
					for _, a := range list(pb, "args") {
						if req, _ := a["required"].(bool); req && a["default"] == nil {
							required = append(required, str(a, "name"))
						}
					}
					if len(required) == 1 {
						args["args"] = map[string]any{required[0]: input}
					}
				}
				what := "launch the playbook " + str(pb, "name")
				if input != "" {
					what += " with input " + fmt.Sprintf("%q", input)
				}
				return call("launch_playbook", args), what, true
			}}
	case reAlters.MatchString(s) && !(reTheme.MatchString(s) && reThemeVerb.MatchString(s)):
		return answer{cannotAlter}
	}
	return nil
}

const cannotAlter = "I cannot do that offline: I only propose the changes I know — launch a playbook or workflow, " +
	"cancel or retry a run, pause, resume or delete a schedule, create or delete a playbook, delete a workflow, " +
	"maintain the database (\"delete playbook NAME\" proposes that deletion). Other edits are yours to make in the cockpit."

// notPlaybookWords follow "run" or "start" without naming a playbook.
var notPlaybookWords = map[string]bool{"run": true, "runs": true, "stats": true, "statistics": true, "schedule": true,
	"schedules": true, "maintenance": true, "vacuum": true, "integrity": true, "checkpoint": true, "health": true,
	"doctor": true, "a": true, "an": true, "it": true, "again": true, "over": true}

func joinNames(items []map[string]any) string {
	var ns []string
	for _, it := range items {
		ns = append(ns, str(it, "name"))
	}
	return strings.Join(ns, ", ")
}

// runByPrefix finds a run by id or id prefix among runs of some statuses,
// then proposes a command on it.
func runByPrefix(prefix, tool, verb string, statuses []string) intent {
	return lookupThen{lookup: call("list_runs", map[string]any{"limit": 50}),
		pick: func(v map[string]any) (model.ToolCall, string, bool) {
			var found []map[string]any
			for _, r := range list(v, "runs") {
				if strings.HasPrefix(str(r, "id"), prefix) {
					found = append(found, r)
				}
			}
			switch {
			case len(found) == 0:
				return model.ToolCall{}, fmt.Sprintf("I found no recent run whose id starts with %s.", prefix), false
			case len(found) > 1:
				return model.ToolCall{}, fmt.Sprintf("%d runs start with %s; give more of the id.", len(found), prefix), false
			}
			r := found[0]
			ok := false
			for _, st := range statuses {
				ok = ok || str(r, "status") == st
			}
			if !ok {
				return model.ToolCall{}, fmt.Sprintf("Run `%s` is %s, so I cannot %s it.", shortID(str(r, "id")), str(r, "status"), verb), false
			}
			return call(tool, map[string]any{"run": str(r, "id")}), fmt.Sprintf("%s run `%s` of %s", verb, shortID(str(r, "id")), str(r, "playbook")), true
		}}
}

// propose calls one command tool and reports the operator's decision.
type propose struct {
	c    model.ToolCall
	what string
}

func (in propose) next(results []result) Step {
	if len(results) == 0 {
		return Step{Text: proposing(in.what), Calls: []model.ToolCall{in.c}}
	}
	return decided(results[len(results)-1], in.what)
}

// lookupThen reads first, then proposes what the read found.
type lookupThen struct {
	lookup model.ToolCall
	pick   func(map[string]any) (model.ToolCall, string, bool)
}

func (in lookupThen) next(results []result) Step {
	switch len(results) {
	case 0:
		return Step{Calls: []model.ToolCall{in.lookup}}
	case 1:
		if !results[0].ok {
			return failed(results[0])
		}
		c, what, ok := in.pick(results[0].value)
		if !ok {
			return Step{Text: what}
		}
		return Step{Text: proposing(what), Calls: []model.ToolCall{c}}
	}
	// The decision's result: what the lookup picked is in the first result.
	_, what, _ := in.pick(results[0].value)
	return decided(results[len(results)-1], what)
}

func proposing(what string) string {
	return fmt.Sprintf("I proposed to %s. Nothing happens until you confirm it; you can also deny it. ", what)
}

// decided reports the operator's decision and the command's outcome. It
// never says who decided: on a team, the confirming principal may not be
// the one whose turn proposed it (the proposal card names both).
func decided(r result, what string) Step {
	if r.ok {
		if r.value["noChange"] == true { // the server found nothing to change
			msg, _ := r.value["message"].(string)
			return Step{Text: fmt.Sprintf("It was confirmed, but nothing changed: %s.", msg)}
		}
		return Step{Text: fmt.Sprintf("It was confirmed, and it is done: %s.", what)}
	}
	code, _ := r.err["code"].(string)
	msg, _ := r.err["message"].(string)
	switch code {
	case "denied":
		return Step{Text: "It was declined, so nothing was changed."}
	case "stale_context":
		return Step{Text: "Nothing was changed: " + msg}
	case "conflict":
		if details, _ := r.err["details"].(map[string]any); details["noChange"] == true {
			return Step{Text: "Nothing to do: " + msg + "."}
		}
	case "cancelled":
		return Step{Text: "The turn was cancelled before a decision; nothing was changed."}
	case "audit_unavailable":
		return Step{Text: "I could not record the proposal durably, so nothing was changed: " + msg}
	}
	return Step{Text: fmt.Sprintf("That did not work (%s): %s", code, msg)}
}

// firstOf is the first non-empty of a regexp's alternative groups.
func firstOf(groups []string) string {
	for _, g := range groups {
		if g != "" {
			return g
		}
	}
	return ""
}
