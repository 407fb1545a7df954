package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// SecretPrefix starts every signing secret (Standard Webhooks' whsec_).
const SecretPrefix = "whsec_"

// NewSecret is a fresh signing secret: whsec_ and the base64 of 32 random
// bytes (256 bits).
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// secretKey is the HMAC key of a secret: the base64-decoded part after
// whsec_.
func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("webhook secret is not whsec_ and base64: %w", err)
	}
	return key, nil
}

// Sign is the webhook-signature header of a message (Standard Webhooks):
// "v1," and the base64 HMAC-SHA256, keyed by the secret, of
// "<id>.<timestamp>.<body>", timestamp in unix seconds.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
