package redact

import (
	"strings"
	"unicode"
)

// daemonRules are what gitleaks' rules do not know and this daemon does:
// its own credentials' shapes, the chat webhooks it posts to, and shapes
// gitleaks only takes with a keyword beside them.
var daemonRules = []ruleSpec{
	// Personal tokens (and the owner token once it has the prefix): stu_
	// and 256 random bits, base64url.
	{id: "studio-personal-token", regex: `(?:^|[^A-Za-z0-9])(stu_[A-Za-z0-9_-]{20,})`, keywords: []string{"stu_"}},
	// Stream tickets: stt_ and 256 random bits, base64url.
	{id: "studio-stream-ticket", regex: `(?:^|[^A-Za-z0-9])(stt_[A-Za-z0-9_-]{20,})`, keywords: []string{"stt_"}},
	// Standard Webhooks signing secrets.
	{id: "studio-webhook-secret", regex: `(whsec_[A-Za-z0-9+/=_-]{16,})`, keywords: []string{"whsec_"}},
	// Chat webhooks whose URL is the credential.
	{id: "slack-webhook", regex: `(?i)hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{8,})`, keywords: []string{"hooks.slack.com"}},
	{id: "discord-webhook", regex: `(?i)(?:discord(?:app)?\.com|discord\.gg)/api/(?:v\d+/)?webhooks/([0-9]+/[A-Za-z0-9_-]+)`, keywords: []string{"discord"}},
	{id: "teams-webhook", regex: `(?i)webhook\.office\.com/webhookb2/([A-Za-z0-9@/_-]+)`, keywords: []string{"webhook.office.com"}},
	{id: "teams-workflow-webhook", regex: `(?i)\.logic\.azure\.com(?::443)?/workflows/([^\s"'<>]+)`, keywords: []string{"logic.azure.com"}},
	// Shapes this daemon knew before the rule set, kept for what gitleaks
	// takes only with a keyword or a stricter format.
	{id: "openai-like-key", regex: `(?:^|[^A-Za-z0-9])(sk-[A-Za-z0-9_-]{20,})`, keywords: []string{"sk-"}},
	{id: "github-token", regex: `(?:^|[^A-Za-z0-9])(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})`, keywords: []string{"gh", "github_pat_"}},
	{id: "gitlab-token", regex: `(?:^|[^A-Za-z0-9])(glpat-[A-Za-z0-9_-]{20,})`, keywords: []string{"glpat-"}},
	{id: "slack-token", regex: `(?:^|[^A-Za-z0-9])(xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})`, keywords: []string{"xox", "xapp-"}},
	{id: "aws-key-id", regex: `(?:^|[^A-Za-z0-9])((?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA|ANPA)[A-Z0-9]{16})`, keywords: []string{"akia", "asia", "abia", "acca", "aida", "aroa", "anpa"}},
	{id: "google-api-key", regex: `(?:^|[^A-Za-z0-9])(AIza[0-9A-Za-z_-]{35})`, keywords: []string{"aiza"}},
	{id: "stripe-key", regex: `(?:^|[^A-Za-z0-9])((?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,})`, keywords: []string{"_live_", "_test_"}},
	{id: "npm-token", regex: `(?:^|[^A-Za-z0-9])(npm_[A-Za-z0-9]{36})`, keywords: []string{"npm_"}},
	{id: "huggingface-token", regex: `(?:^|[^A-Za-z0-9])(hf_[A-Za-z0-9]{30,})`, keywords: []string{"hf_"}},
	{id: "pypi-token", regex: `(?:^|[^A-Za-z0-9])(pypi-[A-Za-z0-9_-]{50,})`, keywords: []string{"pypi-"}},
	{id: "jwt-like", regex: `(?:^|[^A-Za-z0-9])(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`, keywords: []string{"eyj"}},
}

// daemonChecks are the daemon rules' tests beyond their regexes.
var daemonChecks = map[string]func(string) bool{
	// sk- also starts kebab-case words; a key always has a digit.
	"openai-like-key": func(s string) bool { return strings.ContainsAny(s, "0123456789") },
}

// Runs of random-looking characters of an exact length, standing alone,
// found by a scan rather than a regex (they have no keyword, so they look
// at every text): the owner token of a token file from before the prefix
// (32 random bytes, base64url: 43 characters), and an AWS
// secret access key without its name beside it (40 characters of base64).
var runShapes = []struct {
	length int
	inRun  func(c byte) bool
}{
	{43, func(c byte) bool { return isAlnumByte(c) || c == '_' || c == '-' }},
	{40, func(c byte) bool { return isAlnumByte(c) || c == '/' || c == '+' }},
}

func isAlnumByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// runClass is, for each byte, the runShapes whose runs it may be part of
// (bit i: shape i): the scan looks at every text, so it reads a table
// rather than calling each shape's test per byte.
var runClass = func() (t [256]uint8) {
	for c := range 256 {
		for i, sh := range runShapes {
			if sh.inRun(byte(c)) {
				t[c] |= 1 << i
			}
		}
	}
	return t
}()

// runSpans finds the runShapes in s.
func runSpans(s string) []span {
	var out []span
	for k, sh := range runShapes {
		bit := uint8(1) << k
		for i := 0; i < len(s); {
			if runClass[s[i]]&bit == 0 {
				i++
				continue
			}
			j := i + 1
			for j < len(s) && runClass[s[j]]&bit != 0 {
				j++
			}
			// The base64 of an AWS key is not followed by padding.
			if j-i == sh.length && (j == len(s) || s[j] != '=') && randomLooking(s[i:j]) {
				out = append(out, span{i, j})
			}
			i = j
		}
	}
	return out
}

// randomLooking reports whether s looks random rather than like a word:
// upper and lower case letters and something else, high entropy, and not a
// JSON cursor (base64 of {").
func randomLooking(s string) bool {
	if strings.HasPrefix(s, "eyJ") {
		return false
	}
	var upper, lowerc, other bool
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r):
			lowerc = true
		default:
			other = true
		}
	}
	return upper && lowerc && other && entropy(s) > 3.5
}
