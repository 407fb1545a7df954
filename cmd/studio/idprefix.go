package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// Id prefixes: the cockpit shows the first 8 characters of a run's,
// conversation's or proposal's id, so a command taking one of those ids
// also takes a unique prefix of it, resolved on the client through the
// list endpoints. An ambiguous prefix is a usage error (exit 2) naming the
// candidates: the argument does not say which one, and trying again will
// not help until it does.

// uuidLen is the length of a full id (a UUID in its text form).
const uuidLen = 36

// isIDPrefix reports whether s is shorter than a full id and made only of
// the characters of one: hex digits and dashes.
func isIDPrefix(s string) bool {
	if s == "" || len(s) >= uuidLen {
		return false
	}
	for _, r := range strings.ToLower(s) {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') && r != '-' {
			return false
		}
	}
	return true
}

// candidate is one id a prefix could mean, with words that tell it apart.
type candidate struct{ id, label string }

// ambiguousError is a prefix that matches more than one id.
type ambiguousError struct {
	kind, prefix string
	matches      []candidate
}

// maxCandidates is how many matches an ambiguous error lists.
const maxCandidates = 10

func (e *ambiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s id prefix %q is ambiguous: it matches %d %ss; give more characters:", e.kind, e.prefix, len(e.matches), e.kind)
	for i, c := range e.matches {
		if i == maxCandidates {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.matches)-maxCandidates)
			break
		}
		fmt.Fprintf(&b, "\n  %s  %s", c.id, c.label)
	}
	return b.String()
}

// resolveID turns a unique prefix into the full id; a full id (or anything
// that is not a prefix of one) passes unchanged, for the server to judge.
// list returns the candidates to match against.
func resolveID(ctx context.Context, kind, ref string, list func(ctx context.Context, prefix string) ([]candidate, error)) (string, error) {
	if !isIDPrefix(ref) {
		return ref, nil
	}
	prefix := strings.ToLower(ref)
	all, err := list(ctx, prefix)
	if err != nil {
		return "", err
	}
	var matches []candidate
	seen := map[string]bool{}
	for _, c := range all {
		if strings.HasPrefix(strings.ToLower(c.id), prefix) && !seen[c.id] {
			seen[c.id] = true
			matches = append(matches, c)
		}
	}
	switch len(matches) {
	case 0:
		return "", protocol.Errorf(protocol.NotFound, "no %s id starts with %q", kind, ref)
	case 1:
		return matches[0].id, nil
	}
	return "", usageError{&ambiguousError{kind: kind, prefix: ref, matches: matches}}
}

// resolveRun resolves a run id prefix: the runs list's q matches an id
// prefix on the server (and names and inputs, filtered out here).
func resolveRun(ctx context.Context, cl *apiclient.Client, ref string) (string, error) {
	return resolveID(ctx, "run", ref, func(ctx context.Context, prefix string) ([]candidate, error) {
		runs, err := pages(ctx, 0, func(q url.Values) ([]studio.Run, string, error) {
			p, err := cl.ListRuns(ctx, q)
			return p.Runs, p.NextCursor, err
		}, url.Values{"q": {prefix}, "limit": {"200"}})
		if err != nil {
			return nil, err
		}
		cs := make([]candidate, 0, len(runs))
		for _, r := range runs {
			cs = append(cs, candidate{r.ID, fmt.Sprintf("%s %s, created %s", r.PlaybookName, r.Status, when(r.CreatedAt))})
		}
		return cs, nil
	})
}

// conversationClient is the operator client and the id of the
// conversation ref names (an id or its unique prefix).
func conversationClient(ctx context.Context, cfg *config, ref string) (*apiclient.Client, string, error) {
	cl, err := operatorClient(cfg)
	if err != nil {
		return nil, "", err
	}
	id, err := resolveConversation(ctx, cl, ref, false)
	return cl, id, err
}

// resolveConversation resolves a conversation id prefix among the active
// and archived conversations, and the deleted ones still recoverable when
// deleted is set.
func resolveConversation(ctx context.Context, cl *apiclient.Client, ref string, deleted bool) (string, error) {
	return resolveID(ctx, "conversation", ref, func(ctx context.Context, _ string) ([]candidate, error) {
		statuses := []string{""}
		if deleted {
			statuses = append(statuses, "deleted")
		}
		var cs []candidate
		for _, status := range statuses {
			cursor := ""
			for {
				page, err := cl.ListConversations(ctx, status, cursor, 100)
				if err != nil {
					return nil, err
				}
				for _, c := range page.Conversations {
					cs = append(cs, candidate{c.ID, fmt.Sprintf("%s %q, updated %s", c.Status, orDash(c.Title), when(c.UpdatedAt))})
				}
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
		}
		return cs, nil
	})
}

// allProposalStatuses lists proposals of every status (the server answers
// the newest 200).
const allProposalStatuses = "pending,executing,succeeded,failed,expired,cancelled,conflict"

// resolveProposal resolves a proposal id prefix: among the pending ones
// first (what confirm and deny are for), then the newest of any status.
func resolveProposal(ctx context.Context, cl *apiclient.Client, ref string) (string, error) {
	list := func(status string) func(context.Context, string) ([]candidate, error) {
		return func(ctx context.Context, _ string) ([]candidate, error) {
			ps, err := cl.Proposals(ctx, status)
			if err != nil {
				return nil, err
			}
			cs := make([]candidate, 0, len(ps))
			for _, p := range ps {
				cs = append(cs, candidate{p.ID, fmt.Sprintf("%s %s: %s", p.Status, p.Risk, truncate(p.Summary, 60))})
			}
			return cs, nil
		}
	}
	id, err := resolveID(ctx, "proposal", ref, list("pending"))
	if protocol.IsCode(err, protocol.NotFound) {
		return resolveID(ctx, "proposal", ref, list(allProposalStatuses))
	}
	return id, err
}
