package conversations

import (
	"strings"
	"unicode"

	"github.com/studio/operator/internal/protocol"
)

// maxSearchTerms and maxTermRunes bound a search query.
const (
	maxSearchTerms = 8
	maxTermRunes   = 64
	maxQueryRunes  = 200
)

// searchTerms splits a query into lower-case words of letters and digits,
// the only characters the search engines index (everything else separates
// words, as in their tokenizers), so no query syntax reaches them.
func searchTerms(q string) ([]string, error) {
	if len([]rune(q)) > maxQueryRunes {
		return nil, protocol.Errorf(protocol.Validation, "q must be at most %d characters", maxQueryRunes).With("field", "q")
	}
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	var out []string
	for _, w := range words {
		if r := []rune(w); len(r) > maxTermRunes {
			w = string(r[:maxTermRunes])
		}
		out = append(out, w)
		if len(out) == maxSearchTerms {
			break
		}
	}
	return out, nil
}
