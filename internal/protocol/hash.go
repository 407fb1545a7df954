package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of v.
// A number beyond the IEEE 754 double range is refused: jsontext would clamp
// it to ±MaxFloat64, so two different commands would share one hash.
func Canonicalize(v []byte) ([]byte, error) {
	c := jsontext.Value(append([]byte(nil), v...))
	if err := c.Canonicalize(); err != nil {
		return nil, Errorf(Validation, "canonicalize: %v", cleanErr(err))
	}
	if err := checkNumbers(v); err != nil {
		return nil, Errorf(Validation, "canonicalize: %v", err)
	}
	return c, nil
}

// checkNumbers refuses numbers that overflow a float64 (RFC 8785 §3.2.2.3
// works on IEEE 754 doubles; ±Infinity has no JSON form).
func checkNumbers(v []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.New(cleanErr(err))
		}
		if tok.Kind() == '0' {
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				return errors.New("number " + tok.String() + " is outside the IEEE 754 double range")
			}
		}
	}
}

// ProposalHash is a proposal's commandHash: the hex SHA-256 of the RFC 8785
// canonical form of {"command": command, "proposalId": id}. It binds the
// command to the one proposal a human confirms (docs/design.md §9.1: a new
// turn, or an amendment, makes a new proposal with a new hash, even for the
// same command), and any client can recompute it from the proposal it shows.
func ProposalHash(command []byte, proposalID string) (string, error) {
	c, err := Canonicalize(command)
	if err != nil {
		return "", err
	}
	id, err := Marshal(proposalID)
	if err != nil {
		return "", err
	}
	// Keys in RFC 8785 order: "command" < "proposalId".
	bound := append(append(append(append([]byte(`{"command":`), c...), `,"proposalId":`...), id...), '}')
	return CommandHash(bound)
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
