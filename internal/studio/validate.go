package studio

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Bounds of command fields. They keep rows, prompts and audit details small
// enough to show and to hand to a model, far above ordinary use.
const (
	MaxNameLen        = 64
	MaxDescriptionLen = 2000
	MaxPromptLen      = 32_768
	MaxInputLen       = 32_768
	MaxArgs           = 20
	MaxArgNameLen     = 40
	MaxArgDescLen     = 500
	MaxArgValueLen    = 4096
	MaxSteps          = 50
	MaxCronLen        = 100
)

var (
	namePattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	argNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

func invalid(field, format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.Validation, format, args...).With("field", field)
}

// checkChangedNameDescription checks the name and description an update
// changes (nil: unchanged).
func checkChangedNameDescription(name, description *string) error {
	if name != nil {
		if err := checkName("name", *name); err != nil {
			return err
		}
	}
	if description != nil {
		return CheckText("description", *description, MaxDescriptionLen, false)
	}
	return nil
}

// changedNameDescription names, for an update's summary, the name and
// description it changes.
func changedNameDescription(name, description *string) []string {
	var parts []string
	if name != nil {
		parts = append(parts, fmt.Sprintf("rename to %q", *name))
	}
	if description != nil {
		parts = append(parts, "description")
	}
	return parts
}

// checkName validates a resource name: 1–64 characters of [a-z0-9-_.],
// starting with a letter or digit, and not a UUID (so that a reference is
// either an id or a name, never both).
func checkName(field, name string) error {
	switch {
	case name == "":
		return invalid(field, "%s is required", field)
	case len(name) > MaxNameLen:
		return invalid(field, "%s must be at most %d characters", field, MaxNameLen)
	case !namePattern.MatchString(name):
		return invalid(field, "%s %q must be lowercase letters, digits, '-', '_' or '.', starting with a letter or digit", field, name)
	case isUUID(name):
		return invalid(field, "%s must not be a UUID", field)
	}
	return nil
}

func checkProject(project string) error {
	if project == "" {
		return nil
	}
	return checkName("project", project)
}

// CheckText validates free text: valid UTF-8, at most maxChars characters,
// and not blank when required. The application's commands and the
// operator's tools check their text with it.
func CheckText(field, s string, maxChars int, required bool) error {
	if !utf8.ValidString(s) {
		return invalid(field, "%s is not valid UTF-8", field)
	}
	if required && strings.TrimSpace(s) == "" {
		return invalid(field, "%s is required", field)
	}
	if n := utf8.RuneCountInString(s); n > maxChars {
		return invalid(field, "%s is %d characters; at most %d are allowed", field, n, maxChars)
	}
	return nil
}

// refPattern is a reference to a resource: an id or a name. Anything else
// (a URL, a path, a shell string) can name nothing, so it is refused before
// any query runs.
var refPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckRef validates a reference to a resource by id or name; "" is refused
// only when required. The application's commands and the operator's tools
// check their references with it.
func CheckRef(field, ref string, required bool) error {
	switch {
	case ref == "" && !required:
		return nil
	case strings.TrimSpace(ref) == "":
		return invalid(field, "%s (an id or a name) is required", field)
	case !refPattern.MatchString(ref):
		return invalid(field, "%s must be an id or a name (letters, digits, . _ -), not %s", field, quote(ref))
	}
	return nil
}

func checkExpectedVersion(v int64, required bool) error {
	if v < 0 || (required && v == 0) {
		return invalid("expectedVersion", "expectedVersion must be the resource's current version (1 or more)")
	}
	return nil
}

func checkArgDecls(field string, args []PlaybookArg) error {
	if len(args) > MaxArgs {
		return invalid(field, "at most %d arguments are allowed", MaxArgs)
	}
	seen := map[string]bool{}
	for i, a := range args {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case a.Name == "" || len(a.Name) > MaxArgNameLen || !argNamePattern.MatchString(a.Name):
			return invalid(f+".name", "argument name %q must be 1 to %d lowercase letters, digits or '_', starting with a letter", a.Name, MaxArgNameLen)
		case a.Name == "input":
			return invalid(f+".name", "argument name \"input\" is reserved for the run's input")
		case seen[a.Name]:
			return invalid(f+".name", "argument %q is declared twice", a.Name)
		}
		seen[a.Name] = true
		if err := CheckText(f+".description", a.Description, MaxArgDescLen, false); err != nil {
			return err
		}
		if a.Default != nil {
			if err := CheckText(f+".default", *a.Default, MaxArgValueLen, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkArgValues(field string, args map[string]string) error {
	if len(args) > MaxArgs {
		return invalid(field, "at most %d arguments are allowed", MaxArgs)
	}
	for k, v := range args {
		if k == "" || len(k) > MaxArgNameLen {
			return invalid(field, "argument name %q is not valid", k)
		}
		if err := CheckText(field+"."+k, v, MaxArgValueLen, false); err != nil {
			return err
		}
	}
	return nil
}

// bindArgs checks given args against a playbook's declarations and fills
// defaults: an undeclared argument, or a required one that is missing and
// has no default, is validation. With partial set, required arguments may
// be missing (a workflow step may leave them to launch time).
func bindArgs(field string, pb store.Playbook, given map[string]string, partial bool) (map[string]string, error) {
	declared := make([]string, 0, len(pb.Args))
	for _, a := range pb.Args {
		declared = append(declared, a.Name)
	}
	out := make(map[string]string, len(pb.Args))
	keys := make([]string, 0, len(given))
	for k := range given {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(declared, k) {
			return nil, invalid(field, "playbook %s has no argument %q", pb.Name, k).With("declaredArgs", declared)
		}
		out[k] = given[k]
	}
	for _, a := range pb.Args {
		if _, ok := out[a.Name]; ok {
			continue
		}
		if a.Default != nil {
			out[a.Name] = *a.Default
			continue
		}
		if a.Required && !partial {
			return nil, invalid(field, "playbook %s needs argument %q", pb.Name, a.Name).With("declaredArgs", declared)
		}
	}
	return out, nil
}

// bindPlaybookArgs finds the playbook ref names and binds args to it: an
// unknown playbook is not_found, an undeclared or missing argument is
// validation.
func (s *Service) bindPlaybookArgs(ctx context.Context, ref string, args map[string]string) (store.Playbook, map[string]string, error) {
	pb, err := s.lookupPlaybook(ctx, ref)
	if err != nil {
		return pb, nil, err
	}
	bound, err := bindArgs("args", pb, args, false)
	return pb, bound, err
}

func storeArgs(args []PlaybookArg) []store.PlaybookArg {
	out := make([]store.PlaybookArg, 0, len(args))
	for _, a := range args {
		out = append(out, store.PlaybookArg{Name: a.Name, Description: a.Description, Required: a.Required, Default: a.Default})
	}
	return out
}

func projectOr(p string) string {
	if p == "" {
		return store.DefaultProject
	}
	return p
}

// quote shortens s for a summary and quotes it.
func quote(s string) string {
	const maxRunes = 80
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxRunes {
		r := []rune(s)
		s = string(r[:maxRunes-1]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// argsPhrase renders args for a summary: "repo=x, focus=tests".
func argsPhrase(args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+quote(args[k]))
	}
	return strings.Join(parts, ", ")
}
