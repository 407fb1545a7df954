package store

import "context"

// SecretScrubber finds the secrets kept in the database from before the
// daemon hid them everywhere (an upgraded install), and redacts them.
type SecretScrubber interface {
	ScrubSecrets(ctx context.Context, p ScrubSecretsParams) (ScrubReport, error)
}

// ScrubSecretsParams says whether to rewrite what was found (else only
// count it) and the audit row of a rewrite (its details are the report).
type ScrubSecretsParams struct {
	Apply bool
	Audit *AppendAdminEventParams
}

// ScrubCount is how many rows of one column held a secret.
type ScrubCount struct {
	Table  string `json:"table"`
	Column string `json:"column"`
	Rows   int    `json:"rows"`
}

// ScrubReport is what a scrub found, and whether it rewrote it.
type ScrubReport struct {
	Rows     int          `json:"rows"`
	Found    []ScrubCount `json:"found"`
	Redacted bool         `json:"redacted"`
}
