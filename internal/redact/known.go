package redact

import (
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Known secrets are the ones this process holds by value: the owner token,
// the configured providers' API keys, webhook signing secrets and URLs,
// tokens and tickets it issued. Whatever their shape, Text hides them.
// A value shorter than minKnown is not kept: it would hide ordinary words.
const minKnown = 8

var known struct {
	mu     sync.RWMutex
	values []string // longest first, so that a value inside another goes with it
	gen    atomic.Uint64
}

// KnownGeneration changes whenever AddKnown adds a value: a redaction kept
// from before a change may miss the value added.
func KnownGeneration() uint64 { return known.gen.Load() }

// AddKnown makes Text hide each value (and its URL-escaped form) wherever
// it appears from now on. Values under 8 bytes are ignored.
func AddKnown(values ...string) {
	known.mu.Lock()
	defer known.mu.Unlock()
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < minKnown {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if !slices.Contains(known.values, form) {
				known.values = append(known.values, form)
				known.gen.Add(1)
			}
		}
	}
	slices.SortFunc(known.values, func(a, b string) int { return len(b) - len(a) })
}

// knownSpans are the places of known values in s.
func knownSpans(s string) []span {
	known.mu.RLock()
	defer known.mu.RUnlock()
	var out []span
	for _, v := range known.values {
		for off := 0; ; {
			i := strings.Index(s[off:], v)
			if i < 0 {
				break
			}
			out = append(out, span{off + i, off + i + len(v)})
			off += i + len(v)
		}
	}
	return out
}
