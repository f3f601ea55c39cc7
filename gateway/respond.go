package gateway

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/httplimit"
)

// respondHandler answers every request itself with a fixed status, body and
// headers (a `respond` route). Content-Type defaults to text/plain.
func respondHandler(rc *config.Respond) func(*fasthttp.RequestCtx, *publicRequest, *httplimit.Result) {
	status := rc.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := []byte(rc.Body)
	headers := make(http.Header, len(rc.Headers)+1)
	for k, v := range rc.Headers {
		headers.Set(k, v)
	}
	if headers.Get("Content-Type") == "" {
		headers.Set("Content-Type", "text/plain; charset=utf-8")
	}
	return func(ctx *fasthttp.RequestCtx, _ *publicRequest, res *httplimit.Result) {
		w := &ctx.Response
		for k, vs := range headers {
			for _, v := range vs {
				w.Header.Add(k, v)
			}
		}
		setRateLimitHeaders(w, res)
		w.SetStatusCode(status)
		w.SetBodyRaw(body) // the engine leaves the body out of an answer to HEAD
	}
}
