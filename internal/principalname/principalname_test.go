package principalname_test

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/studio/operator/internal/principalname"
	"github.com/studio/operator/internal/protocol"
)

func TestCanonicalFoldsCaseAndForm(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"alice":             "alice",
		"Alice@Example.com": "alice@example.com",
		"KIRK":              "kirk",
		"e\u0301va":         "\u00e9va", // composed (NFC)
		"Éva":               "\u00e9va",
		"ΣΩΚΡΆΤΗΣ":          "σωκράτησ",
		"ci-bot_2.v+x":      "ci-bot_2.v+x",
		"山田":                "山田",
		"yamada山田たろう":       "yamada山田たろう", // Latin, Han and Hiragana: allowed together
	} {
		got, err := principalname.Canonical(raw)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	t.Parallel()
	for raw, reason := range map[string]string{
		"\u212Airk":   "confusable",   // KELVIN SIGN: would become kirk
		"\u2126mega":  "confusable",   // OHM SIGN for Ω
		"ｋｉｒｋ":        "confusable",   // fullwidth letters
		"\ufb01le":    "confusable",   // the ﬁ ligature
		"p\u0430ypal": "confusable",   // Cyrillic а among Latin letters
		"\u0430lice":  "confusable",   // the same, first
		"":            "invalid_name", // empty
		"a b":         "invalid_name", // space
		"a/b":         "invalid_name", // a path
		"a:b":         "invalid_name",
		"-lead":       "invalid_name",
		"studio_auth": "invalid_name", // the daemon's own actors
		"a\u200db":    "invalid_name", // a zero-width joiner
		strings.Repeat("a", principalname.MaxLength+1): "invalid_name",
		"\xff": "invalid_name",
	} {
		got, err := principalname.Canonical(raw)
		perr, ok := err.(*protocol.Error)
		if !ok || perr.Code != protocol.Validation || perr.Details["field"] != "name" || perr.Details["reason"] != reason {
			t.Errorf("Canonical(%q) = %q, %#v; want validation, reason %s", raw, got, err, reason)
		}
	}
}

func TestConfusable(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"modern", "rnodern"},
		{"bob1", "bobl"},
		{"paypal", "раураl"}, // Latin and (all but one letter) Cyrillic
	} {
		if !principalname.Confusable(pair[0], pair[1]) {
			t.Errorf("%q and %q: not confusable", pair[0], pair[1])
		}
	}
	if principalname.Confusable("alice", "alice") || principalname.Confusable("alice", "bob") {
		t.Error("a name is confusable with itself, or alice with bob")
	}
}

// oldName is the only names principals had before names were PRECIS
// names: lowercase ASCII letters, digits and . _ @ + -.
var oldName = regexp.MustCompile(`^[a-z0-9][a-z0-9._@+-]{0,63}$`)

// TestOldNamesAreTheirOwnCanonicalForm is why an upgrade renames no
// principal: every name the old rule allowed (and studio_… it refused)
// is its own canonical form.
func TestOldNamesAreTheirOwnCanonicalForm(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringMatching(oldName.String()).Draw(t, "name")
		if strings.HasPrefix(name, "studio_") {
			t.Skip("reserved before as now")
		}
		got, err := principalname.Canonical(name)
		if err != nil || got != name {
			t.Fatalf("Canonical(%q) = %q, %v", name, got, err)
		}
	})
}

// TestCanonicalIsIdempotent: a canonical name is its own canonical form,
// so a name read back from the store signs the same principal in.
func TestCanonicalIsIdempotent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		raw := rapid.String().Draw(t, "raw")
		name, err := principalname.Canonical(raw)
		if err != nil {
			return
		}
		again, err := principalname.Canonical(name)
		if err != nil || again != name {
			t.Fatalf("Canonical(%q) = %q; again: %q, %v", raw, name, again, err)
		}
	})
}
