package offline

// parseChange recognises requests to change Studio: they become proposals
// that the operator confirms. Until the proposals land it understands none.
func parseChange(s string) intent { return nil }
