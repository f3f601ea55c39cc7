package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard is one page and its scripts, embedded in the binary: no
// request leaves the admin listener. uPlot (MIT, see
// dashboard/uPlot.LICENSE) draws the charts; its version and checksums are
// in dashboard/VENDOR.md.
//
//go:embed dashboard
var dashboardFiles embed.FS

// dashboardCSP lets the page load only its own files and fetch only the
// admin API: no inline script or style, no other origin, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// dashboard registers GET /admin/ (the page) and /admin/assets/ (its files).
func (h *handler) dashboard(mux *http.ServeMux) {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic("admin: embedded dashboard missing: " + err.Error())
	}
	assets := http.StripPrefix("/admin/assets/", http.FileServerFS(sub))
	secure := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hd := w.Header()
			hd.Set("Content-Security-Policy", dashboardCSP)
			hd.Set("X-Content-Type-Options", "nosniff")
			hd.Set("Referrer-Policy", "no-referrer")
			hd.Set("X-Frame-Options", "DENY")
			hd.Set("Cache-Control", "no-store")
			h.ServeHTTP(w, r)
		})
	}
	mux.Handle("GET /admin/assets/", secure(assets))
	mux.Handle("GET /admin/{$}", secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, sub, "index.html")
	})))
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		h.writeAPIError(w, r, apiErrorf(http.StatusNotFound, "No admin page at %s.", r.URL.Path))
	})
}
