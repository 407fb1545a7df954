// Package principalname is what makes a principal's name: the PRECIS
// UsernameCaseMapped profile (RFC 8265) for its form, and Unicode's
// security mechanisms (UTS #39) for names that only look alike. Every
// door that names a principal (the admin API, the CLI through it, the
// sign-in proxy's header) goes through Canonical, so one person has one
// name whatever case or form it arrives in, and a name that could pass
// for another's is refused rather than created.
package principalname

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/secure/precis"
	"golang.org/x/text/unicode/norm"

	"github.com/studio/operator/internal/protocol"
)

// MaxLength bounds a name, in characters.
const MaxLength = 64

// ReservedPrefix starts the daemon's own audit actors (studio_operator,
// studio_auth_proxy, …): no principal's name starts with it.
const ReservedPrefix = "studio_"

// punctuation is what a name may hold besides letters, digits and marks:
// a sign-in proxy's users are often e-mail addresses. Anything else
// (/, :, quotes, spaces) would need quoting in a path, a table or a log.
const punctuation = "._-@+"

// invalid is the validation error of a name, with why.
func invalid(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.Validation, "a principal's name %s", fmt.Sprintf(format, args...)).
		With("field", "name").With("reason", "invalid_name")
}

// Canonical is the name raw stands for: PRECIS UsernameCaseMapped (width,
// case and Unicode normalisation) of it, when it is a name at all. Case
// folds (Alice and alice are one principal), but a character that is only
// a variant of another (U+212A KELVIN SIGN for K, fullwidth letters,
// ligatures) is refused, not folded: it would make one person's name out
// of a look-alike. So are names that mix scripts (Latin with a Cyrillic
// а), beyond the mixes of Han, kana, Hangul and Bopomofo with Latin that
// UTS #39 allows. Errors are validation errors saying why.
func Canonical(raw string) (string, error) {
	if raw == "" {
		return "", invalid("is required")
	}
	if !utf8.ValidString(raw) {
		return "", invalid("is not UTF-8")
	}
	for _, r := range raw {
		if s := string(r); norm.NFKC.String(s) != s {
			return "", invalid("contains %U, a variant of %q that could pass for it; write the character itself", r, norm.NFKC.String(s)).
				With("reason", "confusable")
		}
	}
	name, err := precis.UsernameCaseMapped.String(raw)
	if err != nil {
		return "", invalid("has 1 to %d letters, digits or %q and no spaces or other symbols", MaxLength, punctuation)
	}
	if n := utf8.RuneCountInString(name); n == 0 || n > MaxLength {
		return "", invalid("has 1 to %d characters", MaxLength)
	}
	for i, r := range name {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r):
		case i > 0 && (unicode.Is(unicode.M, r) || strings.ContainsRune(punctuation, r)):
		default:
			return "", invalid("starts with a letter or digit and holds only letters, digits, marks or %q, not %q", punctuation, r)
		}
	}
	if strings.HasPrefix(name, ReservedPrefix) {
		return "", invalid("may not start with %s: those are the daemon's own audit actors", ReservedPrefix)
	}
	if scripts := scriptsOf(name); !allowedMix(scripts) {
		return "", invalid("mixes the scripts %s; a name is written in one", strings.Join(scripts, " and ")).With("reason", "confusable")
	}
	return name, nil
}

// Skeleton is UTS #39's skeleton of a canonical name: two names with one
// skeleton look alike (rn and m, paypal in Latin and in Cyrillic letters),
// so a new name whose skeleton is an existing one's is refused.
func Skeleton(name string) string {
	return confusables.Skeleton(name)
}

// Confusable reports whether a and b are different names that look alike.
func Confusable(a, b string) bool {
	return a != b && Skeleton(a) == Skeleton(b)
}

// scriptsOf lists the scripts of name's characters, Common (digits,
// punctuation) and Inherited (combining marks) left out, sorted.
func scriptsOf(name string) []string {
	seen := map[string]bool{}
	for _, r := range name {
		if s := scriptOf(r); s != "" {
			seen[s] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// scriptOf is r's script, "" for Common and Inherited.
func scriptOf(r rune) string {
	if r < utf8.RuneSelf {
		if unicode.IsLetter(r) {
			return "Latin"
		}
		return ""
	}
	if unicode.Is(unicode.Common, r) || unicode.Is(unicode.Inherited, r) {
		return ""
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return "Unknown"
}

// cjkMixes are the mixes of scripts UTS #39's Highly Restrictive level
// allows in one identifier: Japanese, Chinese and Korean writing with
// Latin.
var cjkMixes = [][]string{
	{"Han", "Hiragana", "Katakana", "Latin"},
	{"Bopomofo", "Han", "Latin"},
	{"Hangul", "Han", "Latin"},
}

// allowedMix reports whether scripts (sorted) may share a name.
func allowedMix(scripts []string) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, mix := range cjkMixes {
		if !slices.ContainsFunc(scripts, func(s string) bool { return !slices.Contains(mix, s) }) {
			return true
		}
	}
	return false
}
