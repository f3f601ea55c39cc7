package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// ReloadResult is what a successful reload reports.
type ReloadResult struct {
	// File is the configuration file that was loaded.
	File string `json:"file"`
	// Routes is the number of routes now served.
	Routes int `json:"routes"`
}

// reloadProblem is the 422 answer of a reload that kept the running
// configuration: the problem shape of docs/operations.md with the
// problems found, one per line as `sluice check` prints them.
type reloadProblem struct {
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Status  int      `json:"status"`
	Detail  string   `json:"detail"`
	Error   string   `json:"error"`
	Message string   `json:"message"`
	Errors  []string `json:"errors"`
}

// reloadEndpoint serves POST /admin/v1/reload: it reloads the configuration
// through Options.Reload, the path SIGHUP takes, and answers 200 with a
// [ReloadResult], or 422 with the problems when the running configuration
// is kept. Browsers' cross-origin POSTs are refused (403), so a page on
// another site cannot make a logged-in browser reload the gateway.
func (h *handler) reloadEndpoint() http.Handler {
	serve := h.apiHandler([]string{http.MethodPost}, func(w http.ResponseWriter, r *http.Request) error {
		if h.o.Reload == nil {
			return apiErrorf(http.StatusNotFound, "This gateway was not started from a configuration file, so it has nothing to reload.")
		}
		// The reload outlives a client that hangs up: it is one step
		// that either swaps the new configuration in or keeps the old.
		res, err := h.o.Reload(context.WithoutCancel(r.Context()))
		if err != nil {
			writeReloadProblem(w, err)
			return nil
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "reloaded", "file": res.File, "routes": res.Routes})
		return nil
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.writeAPIError(w, r, apiErrorf(http.StatusForbidden, "A browser's cross-origin request cannot reload the configuration."))
	}))
	return cop.Handler(serve)
}

// writeReloadProblem answers a failed reload.
func writeReloadProblem(w http.ResponseWriter, err error) {
	const status = http.StatusUnprocessableEntity
	detail := "The configuration was not reloaded; the running configuration keeps serving."
	p := reloadProblem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail,
		Error: http.StatusText(status), Message: detail, Errors: strings.Split(err.Error(), "\n")}
	b, _ := json.Marshal(p) // plain strings: cannot fail
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
