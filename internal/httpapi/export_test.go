package httpapi

// Patterns are the route patterns registered on the server's mux, in order.
func Patterns(s *Server) []string { return append([]string(nil), s.mux.patterns...) }
