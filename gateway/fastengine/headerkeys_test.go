package fastengine

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

// TestReplacedHeaderIndexes pins the indexes outbound reads its replaced
// headers by, and the names it sets without normalising.
func TestReplacedHeaderIndexes(t *testing.T) {
	for i, want := range map[int]string{replacedConnection: "Connection", replacedXFF: "X-Forwarded-For", replacedForwarded: "Forwarded"} {
		if replacedHeaders[i] != want {
			t.Errorf("replacedHeaders[%d] = %q, want %q", i, replacedHeaders[i], want)
		}
	}
	if len(replacedHeaders) > 32 {
		t.Errorf("%d replaced headers do not fit the uint32 bit set", len(replacedHeaders))
	}
	for _, k := range [][]byte{keyConnection, keyUpgrade, keyXForwardedFor, keyXForwardedHost, keyXForwardedProto, keyXRealIP} {
		var h fasthttp.RequestHeader
		h.Set(string(k), "client")
		h.SetCanonical(k, []byte("sluice"))
		if n := len(h.PeekAll(string(k))); n != 1 || string(h.Peek(string(k))) != "sluice" {
			t.Errorf("%s: %d values, %q after SetCanonical over a client's value; want one, sluice", k, n, h.Peek(string(k)))
		}
	}
}
