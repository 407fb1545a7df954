// Package web serves the Studio cockpit: the static page, its ES modules and
// its stylesheet, embedded in the binary with go:embed (docs/design.md §2;
// docs/cockpit.md, "Technology"). There is no build step: the files under
// static/ are the files the browser runs.
//
// The page is served at each space's path of the route registry, so a reload
// or a shared link of any space shows that space; assets live under
// /assets/<content hash>/, cached as immutable, so a new binary never serves
// a stale module to an open tab's next load. Every response carries a strict
// Content-Security-Policy: no inline script or style, no other origin.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/studio/operator/internal/spaces"
)

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is the policy of every page and asset: scripts,
// styles and connections only from this origin, images also as data: URLs,
// no framing, no <base>, forms only to this origin.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// AssetPrefix is the path under which assets are served, before the hash.
const AssetPrefix = "/assets/"

// assetBasePlaceholder in index.html becomes /assets/<hash>.
const assetBasePlaceholder = "{{ASSETS}}"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the cockpit.
type Handler struct {
	spacePaths []string
	index      []byte
	indexETag  string
	assets     map[string]asset // by path below static/, e.g. js/main.js
	hash       string
}

// contentTypes are set explicitly: the system's MIME table is not trusted
// (a wrong type for a module script makes the browser refuse it).
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".json":  "application/json",
	".txt":   "text/plain; charset=utf-8",
	".woff2": "font/woff2",
}

// New builds the handler for a route registry: the page is served at the
// path of each of its spaces.
func New(reg spaces.Registry) (*Handler, error) {
	h := &Handler{assets: map[string]asset{}}
	for _, s := range reg.Spaces {
		h.spacePaths = append(h.spacePaths, s.Path)
	}
	sum := sha256.New()
	var names []string
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var indexTemplate []byte
	for _, p := range names {
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel := strings.TrimPrefix(p, "static/")
		sum.Write([]byte(rel))
		sum.Write([]byte{0})
		sum.Write(body)
		if rel == "index.html" {
			indexTemplate = body
			continue
		}
		ct, ok := contentTypes[path.Ext(rel)]
		if !ok {
			ct = "application/octet-stream"
		}
		fh := sha256.Sum256(body)
		h.assets[rel] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(fh[:8]) + `"`}
	}
	h.hash = hex.EncodeToString(sum.Sum(nil)[:6])
	h.index = bytes.ReplaceAll(indexTemplate, []byte(assetBasePlaceholder), []byte(h.AssetBase()))
	ih := sha256.Sum256(h.index)
	h.indexETag = `"` + hex.EncodeToString(ih[:8]) + `"`
	return h, nil
}

// AssetBase is /assets/<hash of every embedded file>.
func (h *Handler) AssetBase() string { return AssetPrefix + h.hash }

// Register adds the page and asset routes to a mux: GET of each space's
// path and of /assets/. Only exact paths are registered, so nothing here
// overlaps the /api/ routes.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, p := range h.spacePaths {
		pattern := "GET " + p
		if p == "/" {
			pattern = "GET /{$}"
		}
		mux.HandleFunc(pattern, h.serveIndex)
	}
	mux.HandleFunc("GET "+AssetPrefix, h.serveAsset)
}

func setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
}

func (h *Handler) notFound(w http.ResponseWriter) {
	setSecurityHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "404 page not found", http.StatusNotFound)
}

// NotFound answers an address the cockpit has no page at, asked for by a
// browser: the page itself with status 404, which shows the cockpit's own
// not-found view (with the rail) instead of an error body.
func (h *Handler) NotFound(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	setSecurityHeaders(hd)
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Type", contentTypes[".html"])
	hd.Del("Content-Length")
	w.WriteHeader(http.StatusNotFound)
	if r.Method != http.MethodHead {
		w.Write(h.index)
	}
}

// serveIndex answers the page. It is revalidated on every load (no-cache
// with an ETag), so a new binary's page and asset hash are seen at once.
func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	setSecurityHeaders(hd)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", h.indexETag)
	hd.Set("Content-Type", contentTypes[".html"])
	if match(r, h.indexETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(h.index)
}

// serveAsset answers /assets/<hash>/<file>. The current hash is cached
// forever (the URL changes with the content); another hash — a page of an
// older binary still open — gets the current file, revalidated each time.
func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, AssetPrefix)
	hash, name, ok := strings.Cut(rest, "/")
	a, found := h.assets[name]
	if !ok || !found || strings.Contains(name, "..") {
		h.notFound(w)
		return
	}
	hd := w.Header()
	setSecurityHeaders(hd)
	hd.Set("Content-Type", a.contentType)
	hd.Set("ETag", a.etag)
	if hash == h.hash {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	if match(r, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(a.body)
}

func match(r *http.Request, etag string) bool {
	for _, v := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if v = strings.TrimSpace(v); v == etag || v == "*" || v == "W/"+etag {
			return true
		}
	}
	return false
}
