package redact_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/redact/redacttest"
	"github.com/studio/operator/internal/spaces"
)

// Realistic-looking credentials. They are made up; each has the shape of the
// real thing.
const (
	openAIKey    = "sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9"
	anthropicKey = "sk-ant-api03-Xy7Qm2Lp9Rt4Vw1Zb8Nc3Jd6Kf0Hg5Se2Ua7Ib4Oc9Pd1"
	githubPAT    = "ghp_9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8lO"
	githubFine   = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF"
	gitlabPAT    = "glpat-Xy7Qm2Lp9Rt4Vw1Zb8Nc"
	slackBot     = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
	awsKeyID     = "AKIAIOSFODNN7EXAMPLE"
	awsSecret    = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	googleKey    = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
	stripeKey    = "sk_live_51H8xYzAbCdEfGhIjKlMnOpQr"
	npmToken     = "npm_abcdefghijklmnopqrstuvwxyz0123456789"
	hfToken      = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
	jwt          = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

const pemKey = `-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACDd0r3Mb8vEwq5nq0u3HqZp0Ux1dXz3Y2wO9ZpQb1y9uQAAAJg=
-----END OPENSSH PRIVATE KEY-----`

func TestText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		// A playbook prompt naming secret files and credentials.
		{"prompt with secret paths and credentials", "read /opt/studio/creds.txt /srv/app/.env /etc/shadow password=hunter2 AWS_SECRET_ACCESS_KEY=" + awsSecret,
			"read [path] [path] [path] password=[redacted] AWS_SECRET_ACCESS_KEY=[redacted]"},

		// key=value and its relatives.
		{"password colon", "Password: hunter2", "Password: [redacted]"},
		{"yaml", "db:\n  password: s3cr3t!\n  user: app", "db:\n  password: [redacted]\n  user: app"},
		{"json in text", `config {"api_key": "abc123", "region": "eu"}`, `config {"api_key": "[redacted]", "region": "eu"}`},
		{"escaped json in text", `{\"client_secret\":\"zzz999\",\"id\":\"x\"}`, `{\"client_secret\":\"[redacted]\",\"id\":\"x\"}`},
		{"camel case", "apiKey=AbC123 secretAccessKey=xyz", "apiKey=[redacted] secretAccessKey=[redacted]"},
		{"env file", "export GITHUB_TOKEN=abc\nDB_PASS=pw1\nPORT=8080", "export GITHUB_TOKEN=[redacted]\nDB_PASS=[redacted]\nPORT=8080"},
		{"header", "X-Api-Key: 0123abcd", "X-Api-Key: [redacted]"},
		{"authorization header", "Authorization: Bearer abc.def.ghi-not-a-jwt\nAccept: */*", "Authorization: [redacted]\nAccept: */*"},
		{"cookie header", "Cookie: sid=abc; theme=dark\nHost: x", "Cookie: [redacted]\nHost: x"},
		{"query string", "GET /api/app/runs?limit=5&access_token=abc123&q=x", "GET /api/app/runs?limit=5&access_token=[redacted]&q=x"},
		{"nested value", "opts=password=hunter2", "opts=password=[redacted]"},
		{"single quotes", "private_key='----abc'", "private_key='[redacted]'"},
		{"cli flag", "mysql --user app --password hunter2 db", "mysql --user app --password [redacted] db"},
		{"presigned url", "https://b.s3.amazonaws.com/o?X-Amz-Credential=AK%2F2024&X-Amz-Signature=abcdef0123",
			"https://b.s3.amazonaws.com/o?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]"},

		// Tokens of known shapes, wherever they appear.
		{"openai", "key " + openAIKey + " leaked", "key [redacted] leaked"},
		{"anthropic", "ANTHROPIC=" + anthropicKey, "ANTHROPIC=[redacted]"},
		{"github", "remote uses " + githubPAT + ".", "remote uses [redacted]."},
		{"github fine-grained", githubFine, "[redacted]"},
		{"gitlab", "(" + gitlabPAT + ")", "([redacted])"},
		{"slack", "slack " + slackBot, "slack [redacted]"},
		{"aws key id", "id " + awsKeyID + " in use", "id [redacted] in use"},
		{"google", "maps " + googleKey, "maps [redacted]"},
		{"stripe", "charge with " + stripeKey, "charge with [redacted]"},
		{"npm and hf", npmToken + " " + hfToken, "[redacted] [redacted]"},
		{"jwt", "session " + jwt, "session [redacted]"},
		{"bearer in prose", "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706'", "curl -H 'Authorization: [redacted]'"},
		{"pem block", "key:\n" + pemKey + "\nend", "key:\n[redacted]\nend"},
		{"pem cut short", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA", "[redacted]"},
		{"url password", "postgres://studio:hunter2@db.internal:5432/studio", "postgres://studio:[redacted]@db.internal:5432/studio"},
		{"slack webhook", "post to https://hooks.slack.com/services/T000/B000/XXXXXXXX now", "post to https://hooks.slack.com/services/[redacted] now"},

		// Host paths.
		{"home", "see /home/alice/.aws/credentials", "see [path]"},
		{"macos", "(/Users/bob/Library/Keychains/login.keychain)", "([path])"},
		{"database file", `open "/var/lib/studio/studio.db": locked`, `open "[path]": locked`},
		{"tilde", "cat ~/.ssh/id_ed25519", "cat [path]"},
		{"windows", `C:\Users\bob\secrets.txt and \\fileserver\share\x.doc`, `[path] and [path]`},
		{"file url", "file:///etc/passwd", "[path]"},
		{"route escape", "/library/../../etc/passwd", "[path]"},
		{"after equals", "STUDIO_DATA_DIR=/srv/studio/state", "STUDIO_DATA_DIR=[path]"},

		// What must stay untouched.
		{"plain text", "Three runs failed today; the nightly audit is paused.", ""},
		{"password prose", "reset the password for the admin account", ""},
		{"cockpit url", "http://127.0.0.1:8765/library?playbook=audit-repo&tab=runs", ""},
		{"https url", "https://github.com/studio/operator/blob/main/README.md#api", ""},
		{"routes", "open /library, then /schedules and /system", ""},
		{"api path", "GET /api/app/playbooks/audit-repo/launch", ""},
		{"uuid", "run 3f2a9c1e-7b4d-4e2a-9f1c-0d8e7a6b5c4d failed", ""},
		{"sha256", "commandHash 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ""},
		{"cron", "0 9 * * 1-5 and */15 * * * *", ""},
		{"token counts", "max_tokens=1024 token_count: 5 tokens=77", ""},
		{"idempotency key", "idempotencyKey=6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1 sort_key=name", ""},
		{"fractions and dates", "1/2 of runs on 2024/01/02, and/or later at 12:30", ""},
		{"relative path", "edit scripts/run.sh and ./web/static/js/app.js", ""},
		{"kebab names", "sk-learn and the task-summarize-failed-runs-weekly playbook", ""},
		{"basic words", "the basic idea: Bearer of news", ""},
		{"status pairs", "status: failed, limit=50, author: jane, secretary: bob", ""},
		{"markdown", "**Runs** — `audit-repo` succeeded (2/3)", ""},
		{"regex", "s/foo/bar/g", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := c.want
			if want == "" {
				want = c.in
			}
			got := redact.Text(c.in)
			if got != want {
				t.Errorf("Text(%q)\n got %q\nwant %q", c.in, got, want)
			}
			if again := redact.Text(got); again != got {
				t.Errorf("not idempotent: %q became %q", got, again)
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
}

// Every route of the cockpit's registry survives redaction.
func TestRoutesStayUntouched(t *testing.T) {
	t.Parallel()
	for _, s := range spaces.Default.Spaces {
		for _, p := range []string{s.Path, s.Path + "/detail", s.Path + "?tab=runs"} {
			if got := redact.Text("go to " + p); got != "go to "+p {
				t.Errorf("route %s became %q", p, got)
			}
		}
	}
}

func TestSecretKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"password": true, "PASSWORD": true, "db_password": true, "Password2": true, "passwd": true,
		"AWS_SECRET_ACCESS_KEY": true, "aws_access_key_id": false, "apiKey": true, "APIKey": true, "api-key": true,
		"X-Api-Key": true, "client_secret": true, "access_token": true, "refresh-token": true, "privateKey": true,
		"credentials": true, "Set-Cookie": true, "DB_PASS": true,
		"token_count": false, "max_tokens": false, "password_hint": false, "idempotencyKey": false,
		"sort_key": false, "secretary": false, "author": false, "tokenizer": false, "bypass": false, "": false,
	} {
		if got := redact.SecretKey(key); got != want {
			t.Errorf("SecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"password":"hunter2","user":"app"}`, `{"password":"[redacted]","user":"app"}`},
		{`{"credentials":{"user":"a","pw":"b"},"n":1}`, `{"credentials":"[redacted]","n":1}`},
		{`{"apiKey":12345,"token":null,"secret":"","auth":true}`, `{"apiKey":"[redacted]","token":null,"secret":"","auth":true}`},
		{`{"prompt":"read /etc/shadow with password=x","version":3}`, `{"prompt":"read [path] with password=[redacted]","version":3}`},
		{`[{"output":"` + githubPAT + `"},"/home/a/b",1.50,-0,1e3]`, `[{"output":"[redacted]"},"[path]",1.50,-0,1e3]`},
		{`{"token_count":5,"idempotencyKey":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1","route":"/library"}`,
			`{"token_count":5,"idempotencyKey":"6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1","route":"/library"}`},
		{`{"a":{"b":[{"client_secret":["x","y"]}]},"c":"\u003c/script\u003e"}`, `{"a":{"b":[{"client_secret":"[redacted]"}]},"c":"</script>"}`},
		{`"just a string /var/lib/x/y"`, `"just a string [path]"`},
		{`not json password=x`, `not json password=[redacted]`},
	}
	for _, c := range cases {
		got := string(redact.JSON([]byte(c.in)))
		if got != c.want {
			t.Errorf("JSON(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
		if json.Valid([]byte(c.in)) && !json.Valid([]byte(got)) {
			t.Errorf("JSON(%s) is not JSON: %s", c.in, got)
		}
	}
}

// FuzzText checks that redaction never panics, keeps valid UTF-8 valid, is
// idempotent, and that a planted secret never survives whatever surrounds it.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "plain", "password=x", "/etc/shadow", "-----BEGIN", "a=b=c", `{\"token\":\"`,
		"http://u:p@h/a/b", "~/.ssh/x", `C:\x\y`, "--password", "Bearer ", "*/5 * * * *"} {
		f.Add(s, s)
	}
	planted := []struct{ text, secret string }{
		{"password=Hunter2Secret", "Hunter2Secret"},
		{githubPAT, githubPAT},
		{awsKeyID, awsKeyID},
		{"/etc/shadow", "/etc/shadow"},
	}
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		for _, p := range planted {
			in := prefix + " " + p.text + " " + suffix
			out := redact.Text(in)
			if utf8.ValidString(in) && !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 out of %q: %q", in, out)
			}
			if strings.Contains(out, p.secret) && !strings.Contains(prefix+suffix, p.secret) {
				t.Fatalf("%q survived in %q", p.secret, out)
			}
		}
		s := prefix + suffix
		out := redact.Text(s)
		if again := redact.Text(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}

// FuzzJSON checks that valid JSON stays valid JSON.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `"x"`, `{"password":"x"}`, `{"a":[1,{"token":{"b":2}}]}`, `{"p":"/etc/x y"}`, `[null,true,1e9]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := redact.JSON(b)
		if json.Valid(b) && !json.Valid(out) {
			t.Fatalf("JSON(%s) = %s is not JSON", b, out)
		}
	})
}

func BenchmarkJSON(b *testing.B) {
	// A page of runs as a read tool answers it.
	var sb strings.Builder
	sb.WriteString(`{"runs":[`)
	for i := range 200 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"id":"3f2a9c1e-7b4d-4e2a-9f1c-0d8e7a6b5c4d","playbook":"audit-repo","status":"failed",` +
			`"output":"The audit found 3 issues in acme/api: the CI config at .github/workflows/ci.yml pins an old action; ` +
			`tests fail on main since 2024-05-01; see https://github.com/acme/api/actions for details.","createdAt":1714550400.5}`)
	}
	sb.WriteString(`],"nextCursor":"MTcxNDU1MDQwMC41fDNmMmE"}`)
	in := []byte(sb.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		redact.JSON(in)
	}
}

// A key glued to a word by an underscore, a dot or a slash is still a key:
// only a letter or a digit before it makes it part of a word.
func TestShapesGluedToWords(t *testing.T) {
	t.Parallel()
	for _, key := range []string{openAIKey, anthropicKey, githubPAT, gitlabPAT, slackBot, awsKeyID, googleKey, stripeKey, npmToken, hfToken, jwt} {
		for _, in := range []string{"run_" + key, "id." + key, "a/" + key, "é" + key, "(" + key + ")"} {
			if got := redact.Text(in); strings.Contains(got, key) || !strings.Contains(got, redact.Secret) {
				t.Errorf("Text(%q) = %q", in, got)
			}
		}
	}
	if got := redact.Text("run_sk-proj-4fX9aQ2LmZ7bT1cR8dV3eW6gH0jK5nP2sU7yB9 failed"); got != "run_[redacted] failed" {
		t.Errorf("the word before the key is kept: %q", got)
	}
	if got := redact.Text("task-" + "sk-looking-like-a-kebab-case-word"); got != "task-sk-looking-like-a-kebab-case-word" {
		t.Errorf("a kebab-case word: %q", got)
	}
}

// A token glued to a word by an underscore in a name the model made up is
// hidden with the name; an ordinary name stays.
func TestName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"run_dapi0123456789abcdef0123456789abcdef":         redact.Secret,
		"call_Pz7Rw2Kd9Lm4Xq8Ns3Vb6Yt1Hf5Jc0Ge7Ua2Ok9Ei4W": redact.Secret,
		"run_" + githubPAT: "run_[redacted]",
		"list_runs":        "list_runs",
		"call_3f2a9c1e-7b4d-4e2a-9f1c-0d8e7a6b5c4d": "call_3f2a9c1e-7b4d-4e2a-9f1c-0d8e7a6b5c4d",
		"get_password_hint":                         "get_password_hint",
	} {
		if got := redact.Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

// A member name that held a secret is hidden in a JSON pointer too, where
// its slashes are escaped.
func TestPointer(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/steps/0/input": "/steps/0/input",
		"/postgres:~1~1admin:Hunter2Secret@db.internal.example~1prod": "/postgres:~1~1admin:[redacted]@db.internal.example~1prod",
		"/" + githubPAT + "/x": "/[redacted]/x",
		"no pointer":           "no pointer",
		"redis:~1~1:Tr0ub4dor3xYz@cache.internal.example:6379": "redis:~1~1:[redacted]@cache.internal.example:6379",
	} {
		if got := redact.Pointer(in); got != want {
			t.Errorf("Pointer(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every family of the secrets corpus is hidden in text, as a JSON value
// and as a JSON member name (each of the 46 was kept in at least one of
// these by the hand list of shapes before the rule set).
func TestCorpusFamiliesHidden(t *testing.T) {
	t.Parallel()
	redacttest.Register()
	for _, sh := range redacttest.Families(stuToken, "Tk9rZXQtVGlja2V0LUZvci1UZXN0cy0wMTIzNDU2Nzg", "whsec_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5") {
		quoted, _ := json.Marshal(sh.Value)
		for where, got := range map[string]string{
			"text":       redact.Text("Here it is: " + sh.Value + " — keep it safe."),
			"json value": string(redact.JSON([]byte(`{"prompt":` + string(quoted) + `}`))),
			"json name":  string(redact.JSON([]byte(`{` + string(quoted) + `:1}`))),
			"secrets":    redact.Secrets("my key is " + sh.Value),
		} {
			if strings.Contains(got, sh.Needle) {
				t.Errorf("%s in %s: %q", sh.Family, where, got)
			}
		}
	}
}

const stuToken = "stu_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3"
