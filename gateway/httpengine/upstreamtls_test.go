package httpengine_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/gatewaytest"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// TestUpstreamTLS: an https:// upstream is verified against
// upstream_tls's ca_file under its server_name, and is shown its client
// certificate, by both engines (cleartext HTTP/1.1 on fasthttp, h2c on
// net/http); without upstream_tls its certificate, which the system's
// roots do not trust, fails (502).
func TestUpstreamTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "upstream CA")
	ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	ca.Issue(t, pkix.Name{CommonName: "sluice-client"}, "sluice-client").Write(t, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	up := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "client %s over HTTP/%d", r.TLS.PeerCertificates[0].Subject.CommonName, r.ProtoMajor)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, pkix.Name{CommonName: "upstream.test"}, "upstream.test").TLS(t)},
			ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // the refused handshakes of the route without upstream_tls
	}
	upAddr := testkit.Serve(t, func(ln net.Listener) error { return up.ServeTLS(ln, "", "") })
	yaml := fmt.Sprintf(`
server: {listen: 127.0.0.1:0, http2: {h2c: true}}
admin: {listen: 127.0.0.1:0}
routes:
  - id: verified
    match: {path: /verified/**}
    upstream: https://%s
    upstream_tls: {ca_file: ca.pem, server_name: upstream.test, cert_file: client.pem, key_file: client-key.pem}
  - id: h2-verified
    match: {path: /h2/**}
    upstream: h2://%[1]s
    upstream_tls: {ca_file: ca.pem, server_name: upstream.test, cert_file: client.pem, key_file: client-key.pem}
  - id: default
    match: {path: /default/**}
    upstream: https://%[1]s
`, upAddr)
	cfg, err := config.Parse(filepath.Join(dir, "sluice.yaml"), []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := gatewaytest.Start(t, gatewaytest.New(t, cfg, gateway.Deps{}))
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	clients := map[string]*http.Transport{"http/1.1": {}, "h2c": {Protocols: &h2c}}
	for proto, tr := range clients {
		t.Cleanup(tr.CloseIdleConnections)
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		get := func(path string) (int, string) {
			t.Helper()
			resp, err := c.Get("http://" + srv.Addr().String() + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := get("/verified/x"); code != 200 || body != "client sluice-client over HTTP/1" {
			t.Errorf("%s to https:// with upstream_tls: %d %q", proto, code, body)
		}
		if code, _ := get("/default/x"); code != http.StatusBadGateway {
			t.Errorf("%s to https:// without upstream_tls: %d, want 502", proto, code)
		}
		want := map[string]int{"http/1.1": http.StatusHTTPVersionNotSupported, "h2c": 200}[proto]
		if code, body := get("/h2/x"); code != want || code == 200 && body != "client sluice-client over HTTP/2" {
			t.Errorf("%s to h2:// with upstream_tls: %d %q, want %d", proto, code, body, want)
		}
	}
}
