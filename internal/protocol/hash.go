package protocol

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of v.
func Canonicalize(v []byte) ([]byte, error) {
	c := jsontext.Value(append([]byte(nil), v...))
	if err := c.Canonicalize(); err != nil {
		return nil, Errorf(Validation, "canonicalize: %v", cleanErr(err))
	}
	return c, nil
}

// CommandHash is the hex SHA-256 of the RFC 8785 canonical form of a command.
func CommandHash(command []byte) (string, error) {
	c, err := Canonicalize(command)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}
