package redact

// ruleSpec is one detection rule as written: gitleaks' rules
// (gitleaks_rules.go) and this daemon's own (daemon_rules.go).
type ruleSpec struct {
	id          string
	regex       string
	keywords    []string // lowercase; the rule runs only on text holding one
	entropy     float64  // the secret's least Shannon entropy (0: any)
	secretGroup int      // the capture group that is the secret (0: the first non-empty one, else the match)
	allow       []allowSpec
}

// allowSpec lets a finding pass: its secret (or match, or line, by target)
// matches one of the regexes, or the secret holds a stopword; with and, both.
type allowSpec struct {
	and       bool
	target    string // "", "match" or "line"
	regexes   []string
	stopwords []string
}
