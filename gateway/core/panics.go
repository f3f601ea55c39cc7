package core

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-gw/sluice/gateway/metrics"
)

// Panics records the panics recovered while serving requests
// (docs/operations.md, "Panics"): each is counted in
// sluice_panics_total{door}; the first at each site (the function and line
// that panicked) is logged at error with its stack, later ones at the same
// site at debug without it. The sites seen are the process's: a gateway
// built on reload shares its predecessor's (Deps.Previous). It is safe for
// concurrent use.
type Panics struct {
	metrics *metrics.Metrics
	log     *slog.Logger
	sites   *panicSites
}

// panicSites are the sites whose panic was logged with its stack.
type panicSites struct {
	mu   sync.Mutex
	seen map[string]bool
}

// NewPanics returns the recorder of a gateway; prev is the one of the
// gateway it replaces, nil for the first.
func NewPanics(m *metrics.Metrics, log *slog.Logger, prev *Panics) *Panics {
	p := &Panics{metrics: m, log: log}
	if prev != nil {
		p.sites = prev.sites
	} else {
		p.sites = &panicSites{seen: map[string]bool{}}
	}
	return p
}

// Record counts and logs v, the value of a panic recovered on a request
// that came in by door (metrics.DoorGateway, …). It is called from the
// function deferred to recover, while the panicking stack is still there to
// name the site and print. A nil *Panics records nothing.
func (p *Panics) Record(door string, v any) {
	if p == nil {
		return
	}
	p.metrics.Panic(door)
	site := panicSite()
	p.sites.mu.Lock()
	first := !p.sites.seen[site]
	p.sites.seen[site] = true // the sites are lines of sluice's code: a bounded set
	p.sites.mu.Unlock()
	if !first {
		p.log.Debug("recovered a panic", "door", door, "site", site, "panic", fmt.Sprint(v))
		return
	}
	p.log.Error("recovered a panic; the request it served was cut off (its stack is logged once per site)",
		"door", door, "site", site, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
}

// Guard runs f, the work of a goroutine a request starts (a tunnel's
// copier, the writer of a hijacked connection, a timer), and reports
// whether it returned: a panic in f is recovered and recorded as door's,
// and guard returns false, for the caller to close what f was serving.
func (p *Panics) Guard(door string, f func()) (ok bool) {
	defer func() {
		if !ok {
			p.Record(door, recover())
		}
	}()
	f()
	return true
}

// panicSite names the function and line that panicked: the first frame
// outside the runtime below runtime.gopanic on the calling goroutine's
// stack, "unknown" when there is none.
func panicSite() string {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	panicking := false
	for {
		f, more := frames.Next()
		if panicking && !strings.HasPrefix(f.Function, "runtime.") {
			return f.Function + ":" + strconv.Itoa(f.Line)
		}
		if f.Function == "runtime.gopanic" {
			panicking = true
		}
		if !more {
			return "unknown"
		}
	}
}
