package gateway

import (
	"net/http"
	"strconv"

	"github.com/sluice-gw/sluice/config"
)

// respondHandler answers every request itself with a fixed status, body and
// headers (a `respond` route). Content-Type defaults to text/plain.
func respondHandler(rc *config.Respond) http.Handler {
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
	headers.Set("Content-Length", strconv.Itoa(len(body)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range headers {
			h[k] = v
		}
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			w.Write(body)
		}
	})
}
