package gateway

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// The rate-limit headers are set with SetCanonical, which skips
// normalisation: each name must be what fasthttp normalises it to, or an
// upstream's header of the same name would be sent twice instead of
// replaced.
func TestRateLimitHeaderKeysCanonical(t *testing.T) {
	for _, k := range append(append([][]byte(nil), rateLimitHeaderKeys...), scgHeaderKeys...) {
		var h fasthttp.ResponseHeader
		h.Set(string(k), "upstream")
		h.SetCanonical(k, []byte("sluice"))
		if n := len(h.PeekAll(string(k))); n != 1 {
			t.Errorf("%s: %d values after SetCanonical over an upstream's value, want 1", k, n)
		}
		if v := string(h.Peek(string(k))); v != "sluice" {
			t.Errorf("%s = %q, want sluice", k, v)
		}
	}
}
