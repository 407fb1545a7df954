package model

import (
	"github.com/studio/operator/internal/redact"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// RateLimitReset is one rate limit's reset as a provider's headers state it.
type RateLimitReset struct {
	Wait      time.Duration // until the limit resets
	Exhausted bool          // the remaining count is zero
}

// RetryAfterMs reads how long a server asks a client to wait, in
// milliseconds: retry-after-ms, then retry-after (seconds or an HTTP date),
// then the provider's rate-limit resets — the exhausted limit's (the latest
// if several), else the nearest. It returns 0 when nothing says.
func RetryAfterMs(h http.Header, now time.Time, resets []RateLimitReset) int64 {
	if h != nil {
		if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
				return int64(math.Ceil(f))
			}
		}
		if v := strings.TrimSpace(h.Get("retry-after")); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
				return int64(math.Ceil(f * 1000))
			}
			if t, err := http.ParseTime(v); err == nil {
				return DurationMs(t.Sub(now))
			}
		}
	}
	var exhausted, nearest int64 = -1, -1
	for _, r := range resets {
		ms := DurationMs(r.Wait)
		if r.Exhausted && ms > exhausted {
			exhausted = ms
		}
		if nearest < 0 || ms < nearest {
			nearest = ms
		}
	}
	if exhausted >= 0 {
		return exhausted
	}
	return max(nearest, 0)
}

// DurationMs rounds a positive duration up to whole milliseconds.
func DurationMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}

// MaxServerMessage bounds how much of a server's error text goes into ours.
const MaxServerMessage = 300

// TruncateServerMessage redacts a server's error text (a key it echoes, a
// URL with a password) and then cuts it to MaxServerMessage bytes on a
// character boundary: a key cut first would no longer have its shape.
func TruncateServerMessage(s string) string {
	s = redact.Text(s)
	if len(s) <= MaxServerMessage {
		return s
	}
	cut := MaxServerMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Redact removes a secret from s, whatever else went wrong.
func Redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}
