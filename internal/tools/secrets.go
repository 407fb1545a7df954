package tools

import (
	"bytes"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
)

// refuseSecrets refuses a command's or an effect's arguments that hold a
// secret-shaped value (an API key, a token, a password under a key that
// names one): a proposal is a durable, audited command and an effect is
// stored and sent to the browser, so a secret must never become either.
// The model sees why, and no value is quoted.
func refuseSecrets(tool string, args []byte) error {
	redacted := redact.JSON(args)
	marker := []byte(redact.Secret)
	if bytes.Count(redacted, marker) <= bytes.Count(args, marker) {
		return nil
	}
	return protocol.Errorf(protocol.Validation,
		"the arguments of %s hold a value shaped like a secret (an API key, token or password); a secret never becomes a command or an effect: ask the operator to enter it themselves",
		tool).With("tool", tool).With("reason", "secret_in_arguments")
}
