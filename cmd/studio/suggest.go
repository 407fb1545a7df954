package main

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Did you mean: a mistyped command, flag or flag value is answered with
// the near names instead of the whole usage. Near is one typing mistake
// away (two for names of seven characters or more), or a longer name the
// typed one begins.

// nearest returns the names near typed, nearest first.
func nearest(typed string, names []string) []string {
	type near struct {
		name string
		d    int
	}
	limit := 1
	if utf8.RuneCountInString(typed) >= 7 {
		limit = 2
	}
	var found []near
	for _, n := range names {
		d := editDistance(strings.ToLower(typed), strings.ToLower(n))
		if d <= limit || (len(typed) > 1 && strings.HasPrefix(n, typed)) {
			found = append(found, near{n, d})
		}
	}
	slices.SortStableFunc(found, func(a, b near) int { return a.d - b.d })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.name
	}
	return out
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of two neighbours ("lsit").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// orList is `a`, `a` or `b`, `a`, `b` or `c`.
func orList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// flagError adds the near flags to pflag's "unknown flag: --stauts" and
// "unknown shorthand flag: 's' in -status" (a long flag given one dash).
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	var typed string
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		typed = name
	} else if _, in, ok := strings.Cut(msg, "unknown shorthand flag: "); ok && strings.HasPrefix(in, "'") {
		if _, arg, ok := strings.Cut(in, " in -"); ok {
			typed = arg
		}
	}
	typed, _, _ = strings.Cut(typed, "=")
	if typed == "" {
		return err
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	near := nearest(typed, names)
	if len(near) == 0 {
		return err
	}
	for i, n := range near {
		near[i] = "--" + n
	}
	return fmt.Errorf("%s: did you mean %s?", msg, orList(near))
}
