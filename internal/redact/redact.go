// Package redact removes secrets and absolute host paths from what people,
// models and application runs write, before it is kept or sent anywhere
// (frames, the model's context, proposals, effects, the search index,
// audit details, logs, webhook bodies, MCP results): the values of keys
// that name a secret (password=…, "api_key": …, Authorization: …), what
// gitleaks' default rule set finds (GitleaksVersion; gitleaks_rules.go),
// this daemon's own credentials by shape (daemon_rules.go), values this
// process knows to be secret (AddKnown), PEM blocks, passwords in URLs, and
// absolute paths outside the cockpit's own routes (docs/design.md §16).
// docs/security.md says where each function is used.
//
// It errs on the side of hiding: a false positive hides a harmless word from
// the model, a false negative stores a secret for good. Ids and command
// hashes (UUIDs, SHA-256 hex) stay: they are what the operator works with.
package redact

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The markers that replace what was removed.
const (
	Secret = "[redacted]"
	Path   = "[path]"
)

// Text redacts secrets and host paths in free text: what reaches the model
// and the frames from the application and from the model.
func Text(s string) string {
	s = Secrets(s)
	if len(s) >= 3 && strings.ContainsAny(s, `/\~`) {
		s = paths(s)
	}
	return s
}

// Secrets redacts secrets alone, leaving host paths: what a person wrote
// (an instruction, a title) and what the daemon records of it (audit
// details, webhook bodies). Every place that stores or sends such text
// passes it here (or through Text, JSON or SecretsJSON, which do too).
func Secrets(s string) string {
	if len(s) < 3 {
		return s
	}
	if strings.Contains(s, "-----BEGIN") {
		s = pemBlock.ReplaceAllString(s, Secret)
	}
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = urlPassword.ReplaceAllString(s, "${1}${2}:"+Secret+"@")
	}
	s = secrets(s)
	s = tokens(s)
	if strings.ContainsAny(s, "=:") {
		s = keyValues(s)
	}
	if strings.Contains(s, "--") {
		s = flags(s)
	}
	return s
}

// pemBlock is a PEM block up to its END line, or to the end of the text when
// the block was cut short (a bounded result may end inside a key).
var pemBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*-----(?s:.*?)(?:-----END [A-Z0-9 ]*-----|\z)`)

// urlPassword is the password of a URL's userinfo: scheme://user:password@.
// The scheme is not needed: glued to a word (run_https://…) or written
// apart from the rest (a stream's pieces), :// starts the userinfo.
var urlPassword = regexp.MustCompile(`(://)([^/\s:@"']*):[^/\s@"']+@`)

// authScheme is an HTTP credential after its scheme: Bearer …, Basic ….
var authScheme = regexp.MustCompile(`(?i)\b(bearer|basic)([ \t]+)([A-Za-z0-9._~+/=-]{16,})`)

// secrets hides the values this process knows (AddKnown) and what the
// rule set finds: gitleaks' default rules and the daemon's own.
func secrets(s string) string {
	return replaceSpans(s, append(knownSpans(s), rules().find(s)...))
}

func tokens(s string) string {
	if !strings.Contains(s, "earer") && !strings.Contains(s, "EARER") && !strings.Contains(s, "asic") && !strings.Contains(s, "ASIC") {
		return s
	}
	return authScheme.ReplaceAllStringFunc(s, func(m string) string {
		sub := authScheme.FindStringSubmatch(m)
		if !strings.ContainsAny(sub[3], "0123456789+/=") { // a long word, not a credential
			return m
		}
		return sub[1] + sub[2] + Secret
	})
}

// keyValues redacts the values of keys that name a secret: key=value,
// key: value, "key": "value", key => value, also inside JSON text that was
// itself escaped into a string (\"key\": \"v\"). It looks back from each
// '=' or ':' for the key, so foo=password=x still hides x.
func keyValues(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '=' && s[i] != ':' {
			continue
		}
		key := keyBefore(s[last:i])
		if key == "" || !SecretKey(key) {
			continue
		}
		vs := i + 1
		if s[i] == '=' && vs < len(s) && s[vs] == '>' {
			vs++
		}
		for vs < len(s) && (s[vs] == ' ' || s[vs] == '\t') {
			vs++
		}
		if n := redacted(s[vs:]); n > 0 { // by an earlier pass
			i = vs + n - 1
			continue
		}
		ve := valueEnd(s, vs)
		if ve == vs {
			continue
		}
		if cookieKey(key) { // a cookie header's value is the rest of its line: a=b; c=d
			if nl := strings.IndexByte(s[vs:], '\n'); nl >= 0 {
				ve = vs + len(strings.TrimRight(s[vs:vs+nl], "\r"))
			} else {
				ve = len(s)
			}
		}
		b.WriteString(s[last:vs])
		b.WriteString(redactValue(s[vs:ve]))
		last, i = ve, ve-1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// keyBefore is the key that ends s, before a separator: spaces, a closing
// quote (maybe escaped) and a word that starts with a letter.
func keyBefore(s string) string {
	j := len(s)
	for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
		if j > 0 && s[j-1] == '\\' {
			j--
		}
	}
	k := j
	for k > 0 && isKeyChar(s[k-1]) {
		k--
	}
	for k < j && !isLetter(s[k]) {
		k++
	}
	return s[k:j]
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isKeyChar(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// valueEnd is where the value starting at vs ends: a quoted string (also
// \"escaped\"), an HTTP credential with its scheme (Bearer abc), or a run up
// to a space or a delimiter.
func valueEnd(s string, vs int) int {
	rest := s[vs:]
	switch {
	case strings.HasPrefix(rest, `\"`):
		if end := strings.Index(rest[2:], `\"`); end >= 0 {
			return vs + 2 + end + 2
		}
	case strings.HasPrefix(rest, `"`), strings.HasPrefix(rest, "'"):
		q := rest[0]
		for i := 1; i < len(rest) && rest[i] != '\n'; i++ {
			switch rest[i] {
			case '\\':
				i++
			case q:
				return vs + i + 1
			}
		}
	case len(rest) > 6 && (strings.EqualFold(rest[:6], "bearer") || strings.EqualFold(rest[:5], "basic")):
		sp := strings.IndexAny(rest, " \t")
		if sp > 0 && sp <= 6 {
			i := sp
			for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
				i++
			}
			if i < len(rest) && !endsValue(rest[i]) {
				return vs + i + runEnd(rest[i:])
			}
		}
	}
	return vs + runEnd(rest)
}

func runEnd(s string) int {
	for i := 0; i < len(s); i++ {
		if endsValue(s[i]) {
			return i
		}
	}
	return len(s)
}

func endsValue(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f', '"', '\'', ',', ';', '&', '<', '>', ')', '}':
		return true
	}
	return false
}

// redacted is the length of the marker s starts with, or 0.
func redacted(s string) int {
	for _, m := range []string{Secret, Path} {
		if strings.HasPrefix(s, m) {
			return len(m)
		}
	}
	return 0
}

// redactValue replaces a value, keeping its quotes.
func redactValue(v string) string {
	for _, q := range []string{`\"`, `"`, `'`} {
		if len(v) >= 2*len(q) && strings.HasPrefix(v, q) && strings.HasSuffix(v, q) {
			inner := v[len(q) : len(v)-len(q)]
			if inner == "" || inner == Secret {
				return v
			}
			return q + Secret + q
		}
	}
	return Secret
}

// flag is a command-line flag naming a secret with its value after a space.
var flag = regexp.MustCompile(`(^|\s)--?([a-zA-Z][a-zA-Z0-9_-]*)([ \t]+)([^\s"'-][^\s"']*)`)

func flags(s string) string {
	return flag.ReplaceAllStringFunc(s, func(m string) string {
		sub := flag.FindStringSubmatch(m)
		if !SecretKey(sub[2]) || sub[4] == Secret {
			return m
		}
		return m[:len(m)-len(sub[4])] + Secret
	})
}

// SecretKey reports whether a key (password, AWS_SECRET_ACCESS_KEY, apiKey,
// X-Api-Key, client_secret …) names a secret. The key's last word decides:
// token_count and password_hint are not secrets, access_token is.
func SecretKey(key string) bool {
	words := splitWords(key)
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	prev := ""
	if len(words) > 1 {
		prev = words[len(words)-2]
	}
	switch last {
	case "password", "passwd", "pwd", "passphrase", "secret", "secrets", "token", "credential", "credentials",
		"cookie", "authorization", "auth", "apikey", "privatekey", "secretkey", "accesskey", "signature":
		return true
	case "key":
		return slices.Contains(keyQualifiers, prev)
	case "pass":
		return slices.Contains(passQualifiers, prev)
	}
	return false
}

// keyQualifiers make "…_key" a secret: api_key, private_key, but not
// idempotency_key or sort_key.
var keyQualifiers = []string{"api", "access", "secret", "private", "signing", "encryption", "master", "client",
	"auth", "session", "license", "account", "service", "ssh", "deploy", "consumer", "app", "webhook", "x"}

// passQualifiers make "…_pass" a password: DB_PASS, but not test_pass.
var passQualifiers = []string{"db", "database", "user", "admin", "root", "mysql", "pg", "postgres", "redis",
	"smtp", "ftp", "mail", "login", "ldap"}

// cookieKey is a Cookie or Set-Cookie header, whose value runs to the end
// of the line: a=b; c=d.
func cookieKey(key string) bool {
	words := splitWords(key)
	return words[len(words)-1] == "cookie"
}

// splitWords splits a key into lowercase words at punctuation and camelCase
// boundaries (APIKey → api key), dropping trailing digits (password2).
func splitWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		w := strings.TrimRightFunc(string(cur), unicode.IsDigit)
		if w != "" {
			words = append(words, strings.ToLower(w))
		}
		cur = cur[:0]
	}
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && len(cur) > 0:
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// AllowedRoots are the first segments of absolute paths that are the
// cockpit's and the API's own, not the host's: /library, /api/app/runs/….
var AllowedRoots = []string{"mission", "fleet", "designer", "library", "history", "schedules", "system",
	"api", "assets", "healthz", "readyz", "metrics"}

// pathChars are what a path is made of, up to a delimiter.
const pathChars = `[^\s"'<>()\[\]{},;|*?` + "`" + `]`

var (
	homePath = regexp.MustCompile(`(^|[\s"'(\[{<>=,;:|])(~[A-Za-z0-9_.-]*/` + pathChars + `+)`)
	winPath  = regexp.MustCompile(`(^|[^A-Za-z0-9])([A-Za-z]:\\` + pathChars + `+|\\\\[A-Za-z0-9_.$-]+\\` + pathChars + `+)`)
	fileURL  = regexp.MustCompile(`\bfile:/` + pathChars + `*`)
)

func paths(s string) string {
	if strings.Contains(s, "file:/") {
		s = fileURL.ReplaceAllString(s, Path)
	}
	if strings.Contains(s, "/") {
		s = unixPaths(s)
	}
	if strings.Contains(s, "~") {
		s = homePath.ReplaceAllString(s, "${1}"+Path)
	}
	if strings.Contains(s, `\`) {
		s = winPath.ReplaceAllString(s, "${1}"+Path)
	}
	return s
}

// unixPaths replaces absolute paths of at least two segments that start the
// text or follow a delimiter — never a URL's path (https://host/a/b), a
// fraction (1/2) or a cron step (*/5) — unless they are the cockpit's own.
func unixPaths(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '/' || i > 0 && !pathBoundary(s[i-1]) || i+1 == len(s) || s[i+1] == '/' || !isPathChar(s[i+1]) {
			continue
		}
		end := i + 1
		for end < len(s) && isPathChar(s[end]) {
			end++
		}
		p := s[i:end]
		if strings.Contains(p[1:], "/") && !cockpitPath(p) {
			b.WriteString(s[last:i])
			b.WriteString(Path)
			last = end
		}
		i = end - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isPathChar(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f', '"', '\'', '<', '>', '(', ')', '[', ']', '{', '}', ',', ';', '|', '*', '?', '`':
		return false
	}
	return true
}

func pathBoundary(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f', '"', '\'', '(', '[', '{', '<', '>', '=', ',', ';', ':', '|':
		return true
	}
	return false
}

// cockpitPath reports whether an absolute path is one of the cockpit's
// routes or API paths rather than a file on the host.
func cockpitPath(p string) bool {
	p, _, _ = strings.Cut(p, "?")
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if slices.Contains(segs, "..") || slices.Contains(segs, ".") {
		return false
	}
	return slices.Contains(AllowedRoots, segs[0]) && utf8.ValidString(p)
}

// Name redacts an identifier a model made up (a tool's name, a call id) as
// Text does, and whole when a secret starts after one of its underscores:
// an underscore glues a token to a word (run_dop_v1_…) where the rule
// set's word boundaries do not see it.
func Name(s string) string {
	if t := Text(s); t != s {
		return t
	}
	for i := 1; i < len(s); i++ {
		if s[i-1] == '_' && Secrets(s[i:]) != s[i:] {
			return Secret
		}
	}
	return s
}
