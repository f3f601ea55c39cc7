package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestProxyClientAddressHeaders: X-Real-IP reaching the
// upstream is always the client address sluice determined (the peer, or the
// X-Forwarded-For client of a trusted proxy), never the client's claim, and
// a Forwarded header is passed on only from a trusted proxy.
func TestProxyClientAddressHeaders(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		trusted                 []string
		wantRealIP, wantForward string
	}{
		{"untrusted peer", nil, "127.0.0.1", ""},
		{"trusted proxy", []string{"127.0.0.0/8"}, "203.0.113.9", "for=203.0.113.9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, last := recordingUpstream(t)
			cfg := testConfig(upstreamRoute("api", "/api/**", up.URL))
			cfg.Server.TrustedProxies = tt.trusted
			front := httptest.NewServer(newTestGateway(t, cfg))
			defer front.Close()
			req, _ := http.NewRequest("GET", front.URL+"/api/x", nil)
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
			req.Header.Set("X-Real-IP", "198.51.100.66")
			req.Header.Add("Forwarded", "for=203.0.113.9")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			h := last.Load().Header
			if got := h.Values("X-Real-IP"); len(got) != 1 || got[0] != tt.wantRealIP {
				t.Errorf("upstream X-Real-IP = %q, want [%q]", got, tt.wantRealIP)
			}
			if got := h.Get("Forwarded"); got != tt.wantForward {
				t.Errorf("upstream Forwarded = %q, want %q", got, tt.wantForward)
			}
		})
	}
}
