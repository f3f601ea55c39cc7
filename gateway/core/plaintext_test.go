package core

import (
	"crypto/x509"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/testcert"
)

// plaintextTable is a table of a proxy route with a limit and a
// forward_auth route, with server.tls on listen and plaintext mode.
func plaintextTable(t *testing.T, listen string, mode config.Plaintext) *Table {
	t.Helper()
	certFile, keyFile, _ := testcert.SelfSigned(t, t.TempDir())
	cfg := decideConfig(
		proxyRoute("api", config.Match{Path: "/api/**"}, "http://api.test", limitOn(t, "three", "const:all")),
		config.Route{ID: "auth", Match: config.Match{Path: "/auth"}, ForwardAuth: &config.ForwardAuth{From: "request"}},
	)
	cfg.Server.TLS = &config.TLS{Listen: listen, Certificates: []config.Certificate{{CertFile: certFile, KeyFile: keyFile}}, Plaintext: mode}
	return newDecideTable(t, cfg)
}

// decideTLS decides r as a request that came over TLS.
func decideTLS(tab *Table, r req) Outcome {
	return decideWith(tab, r, func(x *Exchange) { x.Req.SetTLS(nil) })
}

// TestPlaintextRedirect: under plaintext redirect, a cleartext request is
// answered 308 to its https URL on the HTTPS listener's port (none for
// 443), IPv6 and ports handled, before any limit runs; a forward_auth
// route is decided as usual; a request over TLS is decided as usual; a
// Host that cannot make a URL is 400.
func TestPlaintextRedirect(t *testing.T) {
	tab := plaintextTable(t, "0.0.0.0:8443", config.PlaintextRedirect)
	for _, tc := range []struct {
		host, target, want string
	}{
		{"gw.test", "/api/x?a=1&b=%20", "https://gw.test:8443/api/x?a=1&b=%20"},
		{"gw.test:8080", "/api/x", "https://gw.test:8443/api/x"},
		{"[2001:db8::1]:8080", "/api/%7Ex", "https://[2001:db8::1]:8443/api/%7Ex"},
		{"gw.test", "/nowhere", "https://gw.test:8443/nowhere"},
	} {
		out := decide(tab, req{host: tc.host, target: tc.target})
		if out.Status != 308 || out.Location != tc.want || out.Forward {
			t.Errorf("%s %s: %d Location %q forward %v, want 308 %s", tc.host, tc.target, out.Status, out.Location, out.Forward, tc.want)
		}
		if out.Result != nil {
			t.Errorf("%s %s: the limits ran before the redirect", tc.host, tc.target)
		}
	}
	for _, host := range []string{"bad host", "gw.test:x", "a/b", "-"} {
		if out := decide(tab, req{host: host, target: "/api/x"}); out.Status != 400 || out.Location != "" {
			t.Errorf("Host %q: %d Location %q, want 400", host, out.Status, out.Location)
		}
	}
	if out := decide(tab, req{target: "/auth"}); out.Status != 200 || routeID(out) != "auth" {
		t.Errorf("forward_auth over cleartext: %d route %q, want 200 from auth", out.Status, routeID(out))
	}
	for range 3 {
		if out := decideTLS(tab, req{target: "/api/x"}); !out.Forward {
			t.Fatalf("over TLS: %d, want forwarded", out.Status)
		}
	}
	if out := decideTLS(tab, req{target: "/api/x"}); out.Status != 429 {
		t.Errorf("the fourth over TLS: %d, want 429 (the cleartext redirects spent nothing)", out.Status)
	}
	tab443 := plaintextTable(t, ":443", config.PlaintextRedirect)
	if out := decide(tab443, req{host: "gw.test:80", target: "/api/x"}); out.Location != "https://gw.test/api/x" {
		t.Errorf("to 443: Location %q, want https://gw.test/api/x", out.Location)
	}
}

// TestPlaintextRefuse: under plaintext refuse, a cleartext request is
// answered 403 naming its https URL, forward_auth routes excepted; under
// serve, it is decided as usual.
func TestPlaintextRefuse(t *testing.T) {
	tab := plaintextTable(t, "127.0.0.1:8443", config.PlaintextRefuse)
	out := decide(tab, req{target: "/api/x"})
	if out.Status != 403 || !strings.Contains(detail(t, out), "https://gw.test:8443/api/x") {
		t.Errorf("refuse: %d %q", out.Status, out.Body)
	}
	if out := decide(tab, req{target: "/auth"}); out.Status != 200 {
		t.Errorf("forward_auth under refuse: %d, want 200", out.Status)
	}
	serve := plaintextTable(t, "127.0.0.1:8443", config.PlaintextServe)
	if out := decide(serve, req{target: "/api/x"}); !out.Forward {
		t.Errorf("serve: %d, want forwarded", out.Status)
	}
}

// TestClientCertificate: the certificate an engine records with SetTLS is
// the request's, and Reset forgets it.
func TestClientCertificate(t *testing.T) {
	cert := &x509.Certificate{}
	var r Request
	r.Reset(&headerWire{}, "GET", []byte("h"), []byte("/"), netip.AddrPort{})
	if r.Secure() || r.ClientCertificate() != nil || r.ForwardedProto() != "http" {
		t.Fatal("a new request is not secure")
	}
	r.SetTLS(cert)
	if !r.Secure() || r.ClientCertificate() != cert || r.ForwardedProto() != "https" {
		t.Fatal("SetTLS did not record the TLS state")
	}
	r.Reset(&headerWire{}, "GET", []byte("h"), []byte("/"), netip.AddrPort{})
	if r.Secure() || r.ClientCertificate() != nil {
		t.Fatal("Reset kept the TLS state")
	}
}
