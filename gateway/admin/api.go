package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// apiError is an admin API failure with its HTTP status. Handlers return
// errors; writeAPIError renders them, the one place admin errors get their
// JSON (the problem shape of docs/operations.md).
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func apiErrorf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// adminStoreTimeout bounds one admin call's store work.
const adminStoreTimeout = 2 * time.Second

// adminBodyMax caps an admin request body, in bytes; a larger one gets 413.
const adminBodyMax = 64 << 10

// writeAPIError renders err: an *apiError with its status, a store failure
// as 503.
func (h *handler) writeAPIError(w http.ResponseWriter, r *http.Request, err error) {
	if ae, ok := errors.AsType[*apiError](err); ok {
		httplimit.WriteProblem(w, ae.status, ae.msg)
		return
	}
	h.o.Logger.Warn("admin API: store failed", "method", clipField(r.Method), "path", clipField(r.URL.Path), "error", err)
	w.Header().Set("Retry-After", "1")
	httplimit.WriteProblem(w, http.StatusServiceUnavailable, "The rate-limit store did not answer: "+err.Error())
}

// apiHandler adapts a handler that returns an error.
func (h *handler) apiHandler(methods []string, serve func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(methods, r.Method) {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			h.writeAPIError(w, r, apiErrorf(http.StatusMethodNotAllowed, "%s is not allowed here (allowed: %s).", r.Method, strings.Join(methods, ", ")))
			return
		}
		if err := serve(w, r); err != nil {
			h.writeAPIError(w, r, err)
		}
	}
}

// api registers the /admin/v1/ endpoints on mux.
func (h *handler) api(mux *http.ServeMux) {
	mux.HandleFunc("/admin/v1/limits/{route}/{key}", h.apiHandler([]string{http.MethodGet, http.MethodDelete}, h.limitsEndpoint))
	mux.HandleFunc("/admin/v1/limits/{route}", h.apiHandler([]string{http.MethodGet, http.MethodDelete}, h.limitsEndpoint))
	mux.HandleFunc("/admin/v1/overrides/{route}/{key}", h.apiHandler([]string{http.MethodGet, http.MethodPut, http.MethodDelete}, h.overrideEndpoint))
	mux.HandleFunc("/admin/v1/overrides/{route}", h.apiHandler([]string{http.MethodGet, http.MethodPut, http.MethodDelete}, h.overrideEndpoint))
	mux.HandleFunc("/admin/v1/overrides", h.apiHandler([]string{http.MethodGet}, func(w http.ResponseWriter, r *http.Request) error {
		list := h.g.Overrides().List()
		out := make([]overrideView, len(list))
		for i, o := range list {
			out[i] = overrideView{Route: o.Route, Key: o.Key, Policy: o.Policy}
		}
		writeJSON(w, http.StatusOK, map[string]any{"overrides": out})
		return nil
	}))
	mux.HandleFunc("/admin/v1/stats", h.apiHandler([]string{http.MethodGet}, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, h.statsView(r))
		return nil
	}))
	mux.Handle("/admin/v1/reload", h.reloadEndpoint())
	mux.HandleFunc("/admin/v1/", func(w http.ResponseWriter, r *http.Request) {
		h.writeAPIError(w, r, apiErrorf(http.StatusNotFound, "No admin endpoint at %s.", r.URL.Path))
	})
}

// adminQuery parses r's query string. Unlike r.URL.Query, which drops the
// pairs it cannot parse (so ?part=%zz&part=b would name the key ["b"]), it
// fails with a 400 on any malformed pair or a semicolon separator: the
// admin API acts on nothing it has not fully understood.
func adminQuery(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, apiErrorf(http.StatusBadRequest, "The query string does not parse: %v.", err)
	}
	return q, nil
}

// Key is a key as every admin answer shows it ("key"; docs/operations.md,
// "Admin API"): a single-part key as a JSON string, a key of several parts as
// an array of strings, however the call gave it ({key} or ?part=).
type Key []string

// MarshalJSON implements [json.Marshaler].
func (k Key) MarshalJSON() ([]byte, error) {
	if len(k) == 1 {
		return json.Marshal(k[0])
	}
	return json.Marshal([]string(k))
}

// UnmarshalJSON implements [json.Unmarshaler]: a string is a one-part key.
func (k *Key) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*k = Key{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(k))
}

// overrideView is one override in the admin API's answers.
type overrideView struct {
	Route  string `json:"route"`
	Key    Key    `json:"key"`
	Policy string `json:"policy"`
}

// target is the route and key an admin call names.
type target struct {
	route *Route
	parts []string
}

// parseTarget reads {route} and either {key} (one part, path-unescaped by
// the mux) or repeated ?part= parameters (a list key).
func (h *handler) parseTarget(r *http.Request) (target, error) {
	id := r.PathValue("route")
	var rt *Route
	for i := range h.o.Routes {
		if h.o.Routes[i].ID == id {
			rt = &h.o.Routes[i]
		}
	}
	if rt == nil {
		return target{}, apiErrorf(http.StatusNotFound, "No route %q.", id)
	}
	q, err := adminQuery(r)
	if err != nil {
		return target{}, err
	}
	key, hasKey := r.PathValue("key"), r.PathValue("key") != ""
	parts := q["part"]
	switch {
	case hasKey && len(parts) > 0:
		return target{}, apiErrorf(http.StatusBadRequest, "Give the key either in the path or as ?part= parameters, not both.")
	case hasKey:
		return target{route: rt, parts: []string{key}}, nil
	case len(parts) == 0:
		return target{}, apiErrorf(http.StatusBadRequest, "No key: use /admin/v1/.../%s/{key} or, for a list key, ?part=a&part=b.", id)
	}
	return target{route: rt, parts: parts}, nil
}

// LimitView is one limit in the answer of GET /admin/v1/limits
// (docs/operations.md, "Admin API").
type LimitView struct {
	Policy    string `json:"policy"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	// Reset is the Unix time (seconds, rounded up) at which the budget is whole again.
	Reset  int64 `json:"reset"`
	Shadow bool  `json:"shadow,omitempty"`
}

// LimitsView is the answer of GET /admin/v1/limits/{route}/{key}.
type LimitsView struct {
	Route  string      `json:"route"`
	Key    Key         `json:"key"`
	Limits []LimitView `json:"limits"`
}

// keyLimits returns the indexes of the route's limits that parts can be a
// key of: the same number of parts, and every fixed part (const, route)
// equal to its value.
func keyLimits(rt *Route, parts []string) []int {
	var out []int
	for i, l := range rt.Limits {
		if len(l.Key) != len(parts) {
			continue
		}
		ok := true
		for j, kp := range l.Key {
			switch kp.Source {
			case httplimit.SourceConst:
				ok = ok && parts[j] == kp.Name
			case httplimit.SourceRoute:
				ok = ok && parts[j] == rt.ID
			}
		}
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// limitsEndpoint serves GET (peek, never consuming) and DELETE (reset) of
// one key's state on a route.
func (h *handler) limitsEndpoint(w http.ResponseWriter, r *http.Request) error {
	t, err := h.parseTarget(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminStoreTimeout)
	defer cancel()
	idx := keyLimits(t.route, t.parts)
	if r.Method == http.MethodDelete {
		// A key's state is kept per policy (docs/semantics.md §4.3), and an
		// override may name any policy: reset the key under every policy
		// there is.
		var reqs []ratelimit.Request
		for _, i := range idx {
			l := &t.route.Limits[i]
			for _, name := range h.o.PolicyNames {
				p := h.o.Policy(name)
				if !httplimit.CanUse(l, p, t.parts) {
					continue // no state of the key under p (Spring Cloud Gateway's keys only)
				}
				reqs = append(reqs, ratelimit.Request{Key: httplimit.BudgetKey(t.route.ID, l, p, t.parts), Policy: p})
			}
		}
		if len(reqs) > 0 {
			if err := h.g.Store().Reset(ctx, reqs); err != nil {
				return err
			}
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	view := LimitsView{Route: t.route.ID, Key: t.parts, Limits: []LimitView{}}
	reqs := make([]ratelimit.Request, len(idx))
	for j, i := range idx {
		l := &t.route.Limits[i]
		p := t.route.PolicyFor(ctx, i, t.parts)
		reqs[j] = ratelimit.Request{Key: httplimit.BudgetKey(t.route.ID, l, p, t.parts), Policy: p, Cost: l.Cost}
	}
	out := make([]ratelimit.Decision, len(reqs))
	if len(reqs) > 0 {
		if err := h.g.Store().Peek(ctx, reqs, out); err != nil {
			return err
		}
	}
	now := h.o.Clock.Now()
	for j, i := range idx {
		d := out[j]
		view.Limits = append(view.Limits, LimitView{
			Policy:    reqs[j].Policy.Name(),
			Algorithm: string(reqs[j].Policy.Algorithm()),
			Limit:     d.Limit,
			Remaining: d.Remaining,
			Reset:     unixCeil(now.Add(d.Reset)),
			Shadow:    t.route.Limits[i].Shadow,
		})
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// unixCeil returns t in Unix seconds, rounded up.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// overrideEndpoint serves GET, PUT and DELETE of one per-key override.
func (h *handler) overrideEndpoint(w http.ResponseWriter, r *http.Request) error {
	t, err := h.parseTarget(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminStoreTimeout)
	defer cancel()
	o := h.g.Overrides()
	switch r.Method {
	case http.MethodGet:
		name := o.Lookup(t.route.ID, t.parts)
		if name == "" {
			return apiErrorf(http.StatusNotFound, "No override for this key on route %q.", t.route.ID)
		}
		writeJSON(w, http.StatusOK, overrideView{Route: t.route.ID, Key: t.parts, Policy: name})
		return nil
	case http.MethodDelete:
		existed, err := o.Remove(ctx, t.route.ID, t.parts)
		if err != nil {
			return err
		}
		if !existed {
			return apiErrorf(http.StatusNotFound, "No override for this key on route %q.", t.route.ID)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	var body struct {
		Policy string `json:"policy"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	p := h.o.Policy(body.Policy)
	if p == nil {
		return apiErrorf(http.StatusBadRequest, "Unknown policy %q (defined: %s).", body.Policy, strings.Join(h.o.PolicyNames, ", "))
	}
	idx := keyLimits(t.route, t.parts)
	if len(idx) == 0 {
		return apiErrorf(http.StatusBadRequest, "No limit of route %q has a %d-part key that %q could be.", t.route.ID, len(t.parts), t.parts)
	}
	for _, i := range idx {
		if c := max(1, t.route.Limits[i].Cost); c > p.Max() {
			return apiErrorf(http.StatusBadRequest, "Policy %q admits at most %d units, below the cost %d of limit %d.", p.Name(), p.Max(), c, i)
		}
	}
	if err := o.Set(ctx, t.route.ID, t.parts, p.Name()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, overrideView{Route: t.route.ID, Key: t.parts, Policy: p.Name()})
	return nil
}

// decodeBody decodes r's body into v: one JSON object with no unknown
// fields, then nothing but JSON whitespace, in at most adminBodyMax bytes
// (413 beyond that, 400 for anything else wrong).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, adminBodyMax)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Decode stops after the object; read on to the end, so that
		// {"policy":"vip"}{"policy":"other"} is not taken as vip.
		var rest []byte
		rest, err = io.ReadAll(io.MultiReader(dec.Buffered(), body))
		if err == nil && strings.TrimLeft(string(rest), " \t\r\n") != "" {
			return apiErrorf(http.StatusBadRequest, "The body must be one JSON object like {\"policy\":\"vip\"} with nothing after it.")
		}
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return apiErrorf(http.StatusRequestEntityTooLarge, "The body is larger than the %d KiB limit.", adminBodyMax>>10)
	}
	if err != nil {
		return apiErrorf(http.StatusBadRequest, "The body must be JSON like {\"policy\":\"vip\"}: %v.", err)
	}
	return nil
}

// writeJSON writes v as the JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httplimit.WriteProblem(w, http.StatusInternalServerError, "Cannot encode the answer.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// maxField bounds each client-controlled field of a log record (the
// method, the path): a longer value is cut to this many bytes and marked,
// as the access log does.
const maxField = 256

// clipField returns s, or its first maxField bytes (cut back to a UTF-8
// boundary) followed by "…[truncated, N bytes]" where N is len(s).
func clipField(s string) string {
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…[truncated, " + strconv.Itoa(len(s)) + " bytes]"
}
