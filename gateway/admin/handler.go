package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// readyTimeout bounds /readyz's store probe.
const readyTimeout = time.Second

// Gateway is what the admin listener asks of the gateway it serves, besides
// the fixed facts in Options.
type Gateway interface {
	// Ready reports whether the instance should take traffic (/readyz),
	// within ctx.
	Ready(ctx context.Context) error
	// Store is the store the limits decide on: the admin API peeks at and
	// resets keys there.
	Store() ratelimit.Store
	// Overrides is the per-key policy overrides table.
	Overrides() Overrides
	// StoreStatus reports the store's state for the dashboard, probing it
	// within ctx.
	StoreStatus(ctx context.Context) StoreView
}

// Overrides is the table of per-key policy overrides. It is safe for
// concurrent use.
type Overrides interface {
	// List returns every override, sorted by route then key.
	List() []Override
	// Lookup returns the policy name set for parts on route, or "".
	Lookup(route string, parts []string) string
	// Set makes policy the override for parts on route.
	Set(ctx context.Context, route string, parts []string, policy string) error
	// Remove deletes the override for parts on route and reports whether
	// there was one.
	Remove(ctx context.Context, route string, parts []string) (bool, error)
}

// Override is one per-key policy set through the admin API.
type Override struct {
	Route  string   `json:"route"`
	Key    []string `json:"key"`
	Policy string   `json:"policy"`
}

// Route is one configured route as the admin API sees it.
type Route struct {
	ID string
	// Limits are the route's limits, IDs filled in, as its middleware has them.
	Limits []httplimit.Limit
	// PolicyFor returns the policy limit i applies to key parts now
	// (overrides and plans included); nil when Limits is empty.
	PolicyFor func(ctx context.Context, i int, parts []string) *ratelimit.Policy
}

// Options are the fixed facts of one gateway the admin listener serves.
type Options struct {
	// Token is admin.token; empty turns all of /admin/ off (404).
	Token string
	// Logins limits failed logins; required.
	Logins *Logins
	// Stats are the dashboard's statistics; required.
	Stats *Stats
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Routes are the configured routes, in order.
	Routes []Route
	// Policy returns the configured policy called name, or nil; PolicyNames
	// lists them all.
	Policy      func(name string) *ratelimit.Policy
	PolicyNames []string
	// Config is the configuration as the dashboard shows it.
	Config ConfigSummary
	// Pools returns the pool routes' targets now, for the dashboard; nil
	// shows none.
	Pools func() []PoolView
	// ShowKey returns a key as the dashboard may show it (hashed, when
	// server.access_log.raw_keys is off); nil shows keys as they are.
	ShowKey func(parts []string) string
	// Logger receives the admin listener's logs; nil discards them.
	Logger *slog.Logger
	// Clock tells the time of the answers; nil means the system clock.
	Clock ratelimit.Clock
	// Reload reloads the configuration from its file, as SIGHUP does, for
	// POST /admin/v1/reload. It returns the problems of a file that was not
	// swapped in, one per line. Nil answers that endpoint 404.
	Reload func(ctx context.Context) (ReloadResult, error)
}

// handler serves one gateway's admin listener.
type handler struct {
	g Gateway
	o Options
}

// New returns the admin listener's handler for g: /healthz, /readyz and
// /metrics without a token, and under /admin/ the admin API (/admin/v1/)
// and the dashboard (/admin/), which need the token: 401 with
// WWW-Authenticate without it, and 404 for all of /admin/ when no token is
// configured (docs/operations.md, "The admin listener").
func New(g Gateway, o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = ratelimit.SystemClock{}
	}
	h := &handler{g: g, o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := g.Ready(ctx); err != nil {
			h.o.Logger.Warn("readyz: store does not answer", "error", err)
			httplimit.WriteProblem(w, http.StatusServiceUnavailable, "The rate-limit store does not answer.")
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ready\n"))
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	admin := http.NewServeMux()
	h.api(admin)
	h.dashboard(admin)
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		token := o.Token
		if token == "" {
			// No token: the admin API and the dashboard are off.
			httplimit.WriteProblem(w, http.StatusNotFound, "Not found.")
			return
		}
		if !o.Logins.admit(w, r, token) {
			return
		}
		// A query that does not parse is 400 for all of /admin/, not only
		// for the handlers that read it today.
		if _, err := adminQuery(r); err != nil {
			h.writeAPIError(w, r, err)
			return
		}
		admin.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httplimit.WriteProblem(w, http.StatusNotFound, "Not found.")
	})
	return mux
}
