package redact

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The detector runs the rule set over a text: gitleaks' default rules and
// this daemon's own (daemonRules), each gated by its keywords so that a
// text runs only the rules whose keywords it holds. The rules compile on
// first use (some 30 ms), so a command that never redacts never pays.

// rule is a compiled ruleSpec.
type rule struct {
	ruleSpec
	re     *regexp.Regexp
	allow  []allow
	check  func(secret string) bool // a daemon rule's test beyond its regex
	global bool                     // gitleaks' global allowlist applies (its rules, not the daemon's)
	// keyed: the rule is gitleaks' "keyword, separator, value" template,
	// whose match holds a keyword followed within a few characters by a
	// separator (= : > | ,); it runs only on windows around such keywords.
	keyed bool
}

type allow struct {
	allowSpec
	re *regexp.Regexp // the regexes joined
}

// ruleSet is the compiled detector.
type ruleSet struct {
	rules     []rule
	always    []int   // rules without keywords: they run on every text
	byKeyword [][]int // keyword index → rules
	keywords  *keywordMatcher
	allow     []allow // the global allowlist
}

var rules = sync.OnceValue(func() *ruleSet {
	specs := slices.Concat(gitleaksRules, daemonRules)
	rs := &ruleSet{allow: compileAllow(gitleaksAllow)}
	kwIndex := map[string]int{}
	var kws []string
	for n, s := range specs {
		r := rule{ruleSpec: s, re: regexp.MustCompile(s.regex), allow: compileAllow(s.allow), check: daemonChecks[s.id],
			global: n < len(gitleaksRules), keyed: strings.HasPrefix(s.regex, keyedTemplate)}
		i := len(rs.rules)
		rs.rules = append(rs.rules, r)
		if len(s.keywords) == 0 {
			rs.always = append(rs.always, i)
			continue
		}
		for _, k := range s.keywords {
			j, ok := kwIndex[k]
			if !ok {
				j = len(kws)
				kwIndex[k] = j
				kws = append(kws, k)
				rs.byKeyword = append(rs.byKeyword, nil)
			}
			if !slices.Contains(rs.byKeyword[j], i) {
				rs.byKeyword[j] = append(rs.byKeyword[j], i)
			}
		}
	}
	rs.keywords = newKeywordMatcher(kws)
	return rs
})

func compileAllow(specs []allowSpec) []allow {
	out := make([]allow, 0, len(specs))
	for _, a := range specs {
		c := allow{allowSpec: a}
		if len(a.regexes) > 0 {
			c.re = regexp.MustCompile(`(?:` + strings.Join(a.regexes, `)|(?:`) + `)`)
		}
		out = append(out, c)
	}
	return out
}

// keyedTemplate starts gitleaks' rules of a keyword, a separator and a
// value: (?i)[\w.-]{0,50}?(?:keyword)(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>|…).
const keyedTemplate = `(?i)[\w.-]{0,50}?(?:`

// span is a secret's place in a text.
type span struct{ start, end int }

// find returns the places of the secrets the rules find in s, in no order,
// possibly overlapping.
func (rs *ruleSet) find(s string) []span {
	out := runSpans(s)
	scan := func(r *rule, off int, text string) {
		for _, m := range r.re.FindAllStringSubmatchIndex(text, -1) {
			if sp, ok := r.secret(text, m, rs.allow); ok {
				out = append(out, span{sp.start + off, sp.end + off})
			}
		}
	}
	for _, i := range rs.always {
		scan(&rs.rules[i], 0, s)
	}
	hits := rs.keywords.find(s)
	seen := map[int]bool{}
	for _, h := range hits {
		for _, i := range rs.byKeyword[h.keyword] {
			if seen[i] {
				continue
			}
			seen[i] = true
			r := &rs.rules[i]
			if !r.keyed {
				scan(r, 0, s)
				continue
			}
			for _, w := range keyedWindows(s, hits, rs.byKeyword, i) {
				scan(r, w.start, s[w.start:w.end])
			}
		}
	}
	return out
}

// keyedWindows are the stretches of s where a keyed rule can match: from
// 64 bytes before each of its keywords that a separator follows closely
// (the template allows 20 + 3 characters between them) to the end of the
// value after it (values hold no blank or quote), merged.
func keyedWindows(s string, hits []keywordHit, byKeyword [][]int, ruleIndex int) []span {
	var ws []span
	for _, h := range hits {
		if !slices.Contains(byKeyword[h.keyword], ruleIndex) {
			continue
		}
		near := s[h.end:min(len(s), h.end+26)]
		if !strings.ContainsAny(near, "=>:|,") {
			continue
		}
		start := max(0, h.start-64)
		end := len(s)
		if from := min(len(s), h.end+32); from < len(s) {
			if k := strings.IndexAny(s[from:], " \t\r\n\"'`;"); k >= 0 {
				end = min(len(s), from+k+2) // the terminator, and a \n or \r after a backslash
			}
		}
		if n := len(ws); n > 0 && start <= ws[n-1].end {
			ws[n-1].end = max(ws[n-1].end, end)
			continue
		}
		ws = append(ws, span{start, end})
	}
	return ws
}

// secret is the secret of one match, as gitleaks takes it: the rule's
// secret group, else the first non-empty group, else the whole match;
// kept when its entropy is above the rule's least and no allowlist lets it
// pass.
func (r *rule) secret(s string, m []int, global []allow) (span, bool) {
	sp := span{m[0], m[1]}
	if r.secretGroup > 0 && 2*r.secretGroup+1 < len(m) {
		if m[2*r.secretGroup] >= 0 {
			sp = span{m[2*r.secretGroup], m[2*r.secretGroup+1]}
		}
	} else {
		for g := 1; 2*g+1 < len(m); g++ {
			if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				sp = span{m[2*g], m[2*g+1]}
				break
			}
		}
	}
	secret := s[sp.start:sp.end]
	if secret == "" || strings.Contains(secret, Secret) {
		return sp, false
	}
	if r.entropy > 0 && entropy(secret) <= r.entropy {
		return sp, false
	}
	if r.check != nil && !r.check(secret) {
		return sp, false
	}
	if r.id == "generic-api-key" && uuidShape.MatchString(secret) {
		return sp, false // an id (idempotencyKey=…), not a credential
	}
	if !r.global {
		global = nil
	}
	match := s[m[0]:m[1]]
	for _, lists := range [][]allow{global, r.allow} {
		for _, a := range lists {
			if a.allows(secret, match, lineAround(s, m[0], m[1])) {
				return sp, false
			}
		}
	}
	return sp, true
}

var uuidShape = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (a allow) allows(secret, match, line string) bool {
	target := secret
	switch a.target {
	case "match":
		target = match
	case "line":
		target = line
	}
	re := a.re != nil && a.re.MatchString(target)
	stop := false
	if len(a.stopwords) > 0 {
		low := strings.ToLower(secret)
		stop = slices.ContainsFunc(a.stopwords, func(w string) bool { return strings.Contains(low, w) })
	}
	if a.and {
		return (a.re == nil || re) && (len(a.stopwords) == 0 || stop)
	}
	return re || stop
}

func lineAround(s string, start, end int) string {
	ls := strings.LastIndexByte(s[:start], '\n') + 1
	le := strings.IndexByte(s[end:], '\n')
	if le < 0 {
		return s[ls:]
	}
	return s[ls : end+le]
}

// entropy is the Shannon entropy of s in bits per byte, as gitleaks
// computes it.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// replaceSpans replaces the spans (merged where they overlap) by the marker.
func replaceSpans(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		sp := spans[i]
		for i++; i < len(spans) && spans[i].start < sp.end; i++ {
			sp.end = max(sp.end, spans[i].end)
		}
		if sp.start < last {
			sp.start = last
		}
		b.WriteString(s[last:sp.start])
		b.WriteString(Secret)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// keywordMatcher finds which of many keywords a text holds, case-blind, in
// one pass (Aho–Corasick over the keywords' bytes).
type keywordMatcher struct {
	class [256]uint8 // byte → its class (0: no keyword holds it)
	width int        // classes
	next  []int32    // state*width + class → state
	out   [][]int    // state → keywords that end here
	lens  []int      // keyword → its length
}

func newKeywordMatcher(kws []string) *keywordMatcher {
	m := &keywordMatcher{width: 1}
	for _, k := range kws {
		m.lens = append(m.lens, len(k))
		for i := 0; i < len(k); i++ {
			c := lower(k[i])
			if m.class[c] == 0 {
				m.class[c] = uint8(m.width)
				if c >= 'a' && c <= 'z' {
					m.class[c-'a'+'A'] = uint8(m.width)
				}
				m.width++
			}
		}
	}
	// The trie.
	goTo := [][]int32{make([]int32, m.width)}
	m.out = [][]int{nil}
	for ki, k := range kws {
		st := 0
		for i := 0; i < len(k); i++ {
			c := m.class[lower(k[i])]
			if goTo[st][c] == 0 {
				goTo = append(goTo, make([]int32, m.width))
				m.out = append(m.out, nil)
				goTo[st][c] = int32(len(goTo) - 1)
			}
			st = int(goTo[st][c])
		}
		m.out[st] = append(m.out[st], ki)
	}
	// Failure links, breadth first, folded into a full transition table.
	fail := make([]int32, len(goTo))
	queue := []int{}
	for c := 1; c < m.width; c++ {
		if s := goTo[0][c]; s != 0 {
			queue = append(queue, int(s))
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		m.out[st] = append(m.out[st], m.out[fail[st]]...)
		for c := 1; c < m.width; c++ {
			s := goTo[st][c]
			if s == 0 {
				goTo[st][c] = goTo[fail[st]][c]
				continue
			}
			fail[s] = goTo[fail[st]][c]
			queue = append(queue, int(s))
		}
	}
	m.next = make([]int32, len(goTo)*m.width)
	for st, row := range goTo {
		copy(m.next[st*m.width:], row)
	}
	return m
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// keywordHit is one place a keyword was found.
type keywordHit struct{ keyword, start, end int }

// find returns every place s holds a keyword, in order of their ends.
func (m *keywordMatcher) find(s string) []keywordHit {
	var found []keywordHit
	// Every text passes here: the tables in locals, the loop's loads few.
	next, class, out, width := m.next, &m.class, m.out, m.width
	st := int32(0)
	for i := 0; i < len(s); i++ {
		st = next[int(st)*width+int(class[s[i]])]
		for _, k := range out[st] {
			found = append(found, keywordHit{keyword: k, start: i + 1 - m.lens[k], end: i + 1})
		}
	}
	return found
}
