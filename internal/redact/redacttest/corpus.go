// Package redacttest is the secrets corpus the tests of several packages
// send through every place the daemon keeps or sends text: families of
// secret shapes (cloud and model providers, version control, chat webhooks,
// private keys, JWTs, URLs with passwords, this daemon's own tokens by
// value and by shape), each with the part of it that must never be found.
package redacttest

import "github.com/studio/operator/internal/redact"

// Shape is one family of secrets: how it is written, and the part of
// it that must never be found anywhere (for a URL, its password).
type Shape struct {
	Family, Value, Needle string
}

// Known are values this daemon knows by value (the wiring in cmd/studio registers the
// token file's, the providers' keys and the webhooks'): made up here, and
// registered as the daemon does.
var (
	OwnerToken  = "Kq3vN8xT2mLw9RbZ4cYh7JdP1sFg6UaE0oXi5nVt2Qk"  // 43 characters, base64url
	ProviderKey = "prov-Vx7Kq2Lm9Zt4Wb8Nc3Rd6Yf1"                // no shape of its own
	HookURL     = "https://hooks.internal.example/in/4c1d9e7b2a" // a generic receiver
)

// Families are the families of secret shapes, made up, and this daemon's
// own credentials as its own code mints them: a personal token (stu), a
// stream ticket and a webhook signing secret (whsec).
func Families(stu, ticket, whsec string) []Shape {
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq7BFUpkGp3+LQmlQ0Kx8eYbd2Vn1wTsZrMpXq4Jh\n-----END RSA PRIVATE KEY-----"
	ssh := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----"
	return []Shape{
		// Model providers and cloud.
		{"openai", "sk-proj-Q7wErTyUiOp0AsDfGhJkL1ZxCvBnM2qW3eR4t", "Q7wErTyUiOp0AsDfGhJkL1"},
		{"anthropic", "sk-ant-api03-ZyXwVuTsRqPoNmLkJiHgFeDcBa0123456789", "ZyXwVuTsRqPoNmLkJiHg"},
		{"openai glued", "run_sk-LmNoPqRsTuVwXyZ0123456789AbCdEf", "LmNoPqRsTuVwXyZ0123456789"},
		{"aws key id", "AKIAZ7QWERTYUIOPASDF", "AKIAZ7QWERTYUIOPASDF"},
		{"aws secret named", "aws_secret_access_key=wJalrXUtnFEMIzK7MDENGzbPxRfiCYzEXAMPLEKEY", "wJalrXUtnFEMIzK7MDENG"},
		{"aws secret bare", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY9xAMPLEK3Y", "K7MDENG/bPxRfiCY9xAMPLEK3Y"},
		{"google api key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "SyA1b2C3d4E5f6G7h8I9j0K1"},
		{"hugging face", "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", "QwErTyUiOpAsDfGhJkLzXcVbNm"},
		{"cohere-like provider key by value", ProviderKey, ProviderKey},
		{"digitalocean", "dop_v1_ac0f723f17b4b783cfbf9b59e9714b6f3f078aa4cfeeb12f526e52a2e30830d1", "_ac0f723f17b4b783cfbf9b59e97"},
		{"databricks", "dapi6563a4507015fa3c9cf39b6399af795f", "63a4507015fa3c9cf39b6399af79"},
		{"heroku v2", "HRKU-AAMwBQYubqU0oIaRmgKfzalNHySzE6zUng4EWIZnFHSmMQcvgfFc0JvgXN8U", "AMwBQYubqU0oIaRmgKfzalNHySzE"},
		{"flyio", "fo1_iyESMA7hlvtJhJGIM98RXBXdS6S5xoeTekwFLYHa8en", "ESMA7hlvtJhJGIM98RXBXdS6S5xo"},
		{"pulumi", "pul-d22f5ef968c7a7f77abad2adbe7659dce33c48b3", "2f5ef968c7a7f77abad2adbe7659"},
		{"doppler", "dp.pt.ew9up5qgkpjmuwaief5cu1ab0wumaq4r97rehavp55k", "qgkpjmuwaief5cu1ab0wumaq4r97"},
		// Version control and packages.
		{"github pat", "ghp_Zq9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8", "Zq9aZ8bY7cX6dW5eV4fU3gT2"},
		{"github fine-grained", "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", "_pat_11Q70YH4veweMyD2wcRjxn_"},
		{"gitlab pat", "glpat-Xy7Qm2Lp9Rt4Vw1Zb8Nc", "Xy7Qm2Lp9Rt4Vw1Zb8Nc"},
		{"npm", "npm_KIzo4ScQIdxBkJXr0UIMJeQpFOM83tFaPdZ8", "zo4ScQIdxBkJXr0UIMJeQpFOM83t"},
		{"pypi", "pypi-AgEIcHlwaS5vcmcCJGQ4ZjM2YzU0LTk0ZTEtNGQ1NC05YjZkLWE3YzNkMmEyYzE0ZQACKlszLCJhYmMiXQ", "AgEIcHlwaS5vcmcCJGQ4ZjM2YzU0"},
		{"linear", "lin_api_cs97g06fb2zps32myce4zh2uyuh8uuz4yxy2n9ft", "i_cs97g06fb2zps32myce4zh2uyu"},
		{"postman", "PMAK-7c6fba297d14cf9d3b5d59f1-648735cafb0586f89f5d4c7c68c738c9f5", "c6fba297d14cf9d3b5d59f1-6487"},
		// Chat and mail.
		{"slack bot", "xoxb-1234567890-0987654321-QwErTyUiOpAsDfGhJkLzXcVb", "QwErTyUiOpAsDfGhJkLzXcVb"},
		{"slack webhook", "https://hooks.slack.com/services/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", "rvices/T01ABCD2E/B01ABCD2EFG"},
		{"discord webhook", "https://discord.com/api/webhooks/1234567890123456789/6SwHuMutFcvT39XnVOf-Nsr7gdCEgqMJO8Uq_o4T7lv5LZGpEAZ3OzDLhzsX9lFhIazo", "i/webhooks/12345678901234567"},
		{"teams webhook", "https://x.webhook.office.com/webhookb2/9f1c2e7a-1111-4222-8333-944455566677@0d8e7a6b-5c4d-4e2a-9f1c-3f2a9c1e7b4d/IncomingWebhook/vdClTCI2PfCvJ5nSnuMpHKJ0dIRjkWgr/6f8a1c4e-2b3d-4e5f-8a9b-0c1d2e3f4a5b", "6b-5c4d-4e2a-9f1c-3f2a9c1e7b"},
		{"configured webhook url", HookURL, "4c1d9e7b2a"},
		{"sendgrid", "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", "0c3M3uQ17FgIf5LTQYJqv0qvMxl0"},
		{"twilio", "SK073bf6609cc27007c0a0516eddc00cc9", "f6609cc27007c0a0516eddc00cc9"},
		// Payments, tokens, keys.
		{"stripe", "sk_live_51HxQwErTyUiOpAsDfGhJkLz", "51HxQwErTyUiOpAsDfGhJkLz"},
		{"shopify", "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", "4c5fb17ed0e1e26fc9a8daeab8ad"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjb3JwdXMtdGVzdCJ9.QwErTyUiOpAsDfGhJkLzXcVbNm0123456789", "QwErTyUiOpAsDfGhJkLzXcVbNm"},
		{"rsa private key", pem, "MIIEowIBAAKCAQEAq7BFUpkGp3"},
		{"openssh private key", ssh, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE"},
		{"age secret key", "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQP", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9"},
		// Passwords and URLs.
		{"password", "password: CorrectHorseBatteryStaple9", "CorrectHorseBatteryStaple9"},
		{"postgres url", "postgres://admin:Hunter2Secret@db.internal.example/prod", "Hunter2Secret"},
		{"redis url", "redis://:Tr0ub4dor3xYz@cache.internal.example:6379/0", "Tr0ub4dor3xYz"},
		{"bearer header", "Authorization: Bearer kHAMDV7ZNQWlo2mxifhsTMMqtFZkyWCK", "7ZNQWlo2mxifhsTMMqtFZkyWCK"},
		{"api key json", `{"api_key": "Zx8Cv7Bn6Mq5Wl4Ek3Rj2Th1"}`, "Zx8Cv7Bn6Mq5Wl4Ek3Rj2Th1"},
		// This daemon's own.
		{"studio personal token", stu, stu[4:]},
		{"studio owner token by value", OwnerToken, OwnerToken[3:]},
		{"studio owner token by shape", "1DkzLMPEjBp3COoOUJ3trJcMDuoVutxHUQLpEDJVnZp", "PEjBp3COoOUJ3trJcMDuoVutxHUQ"},
		{"studio owner token stu_", "stu_YHaoAyuPC5mHrEpgyoTMy7odgus0YOUky65WRgy1ej2", "aoAyuPC5mHrEpgyoTMy7odgus0YO"},
		{"studio stream ticket", ticket, ticket[3:]},
		{"studio webhook secret", whsec, whsec[6:]},
	}
}

// Register makes the redactor know the values a daemon would know by value
// (its token file's, a provider's key, a configured webhook's URL).
func Register() { redact.AddKnown(OwnerToken, ProviderKey, HookURL) }
