package httpapi

import (
	"net/http"

	"github.com/studio/operator/internal/openapi"
)

// handleOpenAPI serves the API's OpenAPI 3.1 description, without auth: it
// describes the API, it discloses nothing of the daemon's data.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := openapi.JSON()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(doc)
}
