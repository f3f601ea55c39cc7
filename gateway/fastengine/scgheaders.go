package fastengine

import (
	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/httplimit"
)

// setSCGHeaders sets Spring Cloud Gateway's rate-limit headers of res on w,
// after the rate-limit trio: SCG's X-RateLimit-Remaining replaces the trio's.
func setSCGHeaders(w *fasthttp.Response, res *httplimit.Result) {
	if !res.HasSCGHeaders() {
		return
	}
	for i, name := range scgHeaderKeys {
		w.Header.SetCanonical(name, res.SCGHeader(i))
	}
}

// scgHeaderKeys are httplimit.SCGHeaderNames as bytes, set without
// normalising (canonicalKeys).
var scgHeaderKeys = canonicalKeys(httplimit.SCGHeaderNames[:])
