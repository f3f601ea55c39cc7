package fastengine

import (
	"errors"
	"net"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/internal/panichook"
)

// answerPanic answers a request whose handler panicked before its answer
// went out: whatever the handler had set (a body stream, a hijack) is
// dropped, and the client gets a 500 and the connection's end, as the
// request's body may be half read.
func answerPanic(ctx *fasthttp.RequestCtx) {
	ctx.HijackSetNoResponse(false)
	ctx.Hijack(nil)
	ctx.Response.Reset() // closes a body stream already set, releasing its leases
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetConnectionClose()
	writeProblem(ctx, http.StatusInternalServerError, "The gateway failed while answering this request.")
}

// hookHeader returns a copy of h for panichook.Hook to peek at from a goroutine
// of its own (a Peek writes to the header), nil without a hook.
func hookHeader(h *fasthttp.RequestHeader) *fasthttp.RequestHeader {
	if panichook.Hook == nil {
		return nil
	}
	c := new(fasthttp.RequestHeader)
	h.CopyTo(c)
	return c
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout() || errors.Is(err, fasthttp.ErrTimeout)
}
