package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// retentionFlag is --retention: how long unused conversations are kept.
// It takes days ("90d") besides Go durations ("2160h"); "0" or "off"
// keeps them for ever.
type retentionFlag struct{ d time.Duration }

var _ pflag.Value = (*retentionFlag)(nil)

func (r *retentionFlag) String() string {
	if r.d <= 0 {
		return "off"
	}
	if r.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(r.d/(24*time.Hour)), 10) + "d"
	}
	return r.d.String()
}

func (r *retentionFlag) Type() string { return "duration" }

func (r *retentionFlag) Set(s string) error {
	d, err := parseRetention(s)
	if err != nil {
		return err
	}
	r.d = d
	return nil
}

// parseRetention reads "90d", "36h", "0" or "off".
func parseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" || s == "off" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 1 || n > 100*365 {
			return 0, fmt.Errorf("retention %q: a whole number of days from 1, such as 90d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Hour {
		return 0, fmt.Errorf("retention %q: days (90d) or a duration of at least an hour (2160h), or off", s)
	}
	return d, nil
}

// addRetentionFlag adds --retention to fs, with its variable.
func addRetentionFlag(fs *pflag.FlagSet, r *retentionFlag, usage string) {
	fs.Var(r, "retention", usage+" (e.g. 90d; default off: kept for ever)")
	bindEnv(fs, "retention")
}
