package gateway

import (
	"net/http"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/metrics"
)

// readyTimeout bounds /readyz's store probe.
const readyTimeout = time.Second

// adminHandler serves the admin listener: /healthz, /readyz and /metrics
// without a token, and under /admin/ the admin API (/admin/v1/, adminapi.go)
// and the dashboard (/admin/, dashboard.go), which need the token: 401 with
// WWW-Authenticate without it, and 404 for all of /admin/ when no token is
// configured (SPEC §6).
func (g *Gateway) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := g.Ready(r.Context(), readyTimeout); err != nil {
			g.log.Warn("readyz: store does not answer", "error", err)
			httplimit.WriteProblem(w, http.StatusServiceUnavailable, "The rate-limit store does not answer.")
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", metrics.Handler(g.registry))
	admin := http.NewServeMux()
	g.adminAPI(admin)
	g.dashboard(admin)
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		token := g.cfg.Admin.Token
		if token == "" {
			// No token: the admin API and the dashboard are off.
			httplimit.WriteProblem(w, http.StatusNotFound, "Not found.")
			return
		}
		if !g.logins.admit(w, r, token) {
			return
		}
		// A query that does not parse is 400 for all of /admin/, not only
		// for the handlers that read it today.
		if _, err := adminQuery(r); err != nil {
			g.writeAPIError(w, r, err)
			return
		}
		admin.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httplimit.WriteProblem(w, http.StatusNotFound, "Not found.")
	})
	return mux
}
