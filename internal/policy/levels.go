package policy

import (
	"fmt"
	"slices"

	"github.com/studio/operator/internal/protocol"
)

// Levels orders what a command risks and how hard it is to undo, least
// first within each scale: risks mutate < execute < admin, impacts
// destructive < irreversible. A policy (or --second-approver-for) naming
// a level covers every level above it on its scale.
var (
	RiskLevels   = []string{protocol.RiskMutate, protocol.RiskExecute, protocol.RiskAdmin}
	ImpactLevels = []string{protocol.ImpactDestructive, protocol.ImpactIrreversible}
)

// ImpactNone is the impact of a command that loses nothing, as policies
// see it (resource.impact).
const ImpactNone = "none"

// Levels lists every level --second-approver-for accepts.
func Levels() []string { return append(slices.Clone(RiskLevels), ImpactLevels...) }

// AtLeast is the command's risk and impact and every level below them on
// their scales: what resource.atLeast holds.
func AtLeast(risk, impact string) []string {
	var out []string
	if i := slices.Index(RiskLevels, risk); i >= 0 {
		out = append(out, RiskLevels[:i+1]...)
	}
	if i := slices.Index(ImpactLevels, impact); i >= 0 {
		out = append(out, ImpactLevels[:i+1]...)
	}
	return out
}

// ParseLevels checks --second-approver-for's values.
func ParseLevels(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		if !slices.Contains(Levels(), v) {
			return nil, fmt.Errorf("%q is not one of %v", v, Levels())
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}
