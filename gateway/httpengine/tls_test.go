package httpengine_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"io"
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

// tlsGateway starts a gateway whose HTTPS listener serves the leaf in
// dir/cert.pem and dir/key.pem, with extra under server.tls and a
// respond route limited to one request per key.
func tlsGateway(t *testing.T, dir, extra, key string) (*gateway.Server, *config.Config) {
	t.Helper()
	port := testkit.FreePorts(t, 1)[0]
	yaml := fmt.Sprintf(`
server:
  listen: 127.0.0.1:0
  tls:
    listen: 127.0.0.1:%d
    certificates: [{cert_file: cert.pem, key_file: key.pem}]
%s
admin: {listen: 127.0.0.1:0}
store: {type: memory}
policies:
  one: {algorithm: fixed_window, limit: 1, window: 1h}
routes:
  - id: hello
    match: {path: /hello}
    respond: {status: 200, body: "hello\n"}
    limits: [{policy: one, key: %q, on_empty_key: deny}]
`, port, extra, key)
	cfg, err := config.Parse(filepath.Join(dir, "sluice.yaml"), []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return gatewaytest.Start(t, gatewaytest.New(t, cfg, gateway.Deps{})), cfg
}

// get sends GET /hello on c and returns the status.
func get(t *testing.T, c *http.Client, base string) int {
	t.Helper()
	resp, err := c.Get(base + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestClientCertificateKey: with client_ca, a client without a certificate
// is refused in the handshake, and a limit keyed on client_cert:cn gives
// each client certificate its own budget, over HTTPS/1.1 and HTTP/2.
func TestClientCertificateKey(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "test CA")
	ca.Issue(t, pkix.Name{CommonName: "gateway"}, "127.0.0.1").Write(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	ca.WriteCert(t, filepath.Join(dir, "clients.pem"))
	srv, _ := tlsGateway(t, dir, "    client_ca: clients.pem", "client_cert:cn")
	base := "https://" + srv.TLSAddr().String()
	client := func(cn string, h2 bool) *http.Client {
		cfg := &tls.Config{RootCAs: ca.Pool()}
		if cn != "" {
			cfg.Certificates = []tls.Certificate{ca.Issue(t, pkix.Name{CommonName: cn}).TLS(t)}
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		if h2 {
			var p http.Protocols
			p.SetHTTP2(true)
			tr.Protocols = &p
		} else {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	for _, h2 := range []bool{false, true} {
		alice, bob := client(fmt.Sprint("alice", h2), h2), client(fmt.Sprint("bob", h2), h2)
		if s := get(t, alice, base); s != 200 {
			t.Errorf("h2 %v: alice's first: %d", h2, s)
		}
		if s := get(t, alice, base); s != 429 {
			t.Errorf("h2 %v: alice's second: %d, want 429", h2, s)
		}
		if s := get(t, bob, base); s != 200 {
			t.Errorf("h2 %v: bob's first: %d, want 200 (a budget of his own)", h2, s)
		}
		if _, err := client("", h2).Get(base + "/hello"); err == nil {
			t.Errorf("h2 %v: a client without a certificate was served", h2)
		}
	}
}

// TestCertificateRotation: a certificate rewritten on disk is offered to
// the next handshake, and one named by a reloaded configuration too,
// while a connection opened before keeps serving.
func TestCertificateRotation(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "test CA")
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.Issue(t, pkix.Name{CommonName: "first"}, "127.0.0.1").Write(t, certFile, keyFile)
	srv, cfg := tlsGateway(t, dir, "", "header:X-Client")
	addr := srv.TLSAddr().String()
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	var h2 http.Protocols
	h2.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, Protocols: &h2, MaxConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	old := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ask := func(client string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", "https://"+addr+"/hello", nil)
		req.Header.Set("X-Client", client)
		resp, err := old.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if _, cn := ask("a"); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	ca.Issue(t, pkix.Name{CommonName: "second"}, "127.0.0.1").Write(t, certFile, keyFile)
	deadline := time.Now().Add(15 * time.Second)
	for served() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the rewritten certificate was not served within 15s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp, cn := ask("b"); resp.StatusCode != 200 || cn != "first" {
		t.Errorf("the connection opened before the rotation: %d on %q, want 200 on first", resp.StatusCode, cn)
	}
	// A reload naming other files.
	ca.Issue(t, pkix.Name{CommonName: "third"}, "127.0.0.1").Write(t, filepath.Join(dir, "third.pem"), filepath.Join(dir, "third-key.pem"))
	next := *cfg
	nextTLS := *cfg.Server.TLS
	nextTLS.Certificates = []config.Certificate{{CertFile: filepath.Join(dir, "third.pem"), KeyFile: filepath.Join(dir, "third-key.pem")}}
	next.Server.TLS = &nextTLS
	srv.Swap(gatewaytest.New(t, &next, gateway.Deps{}))
	if cn := served(); cn != "third" {
		t.Errorf("after the reload: %q, want third", cn)
	}
	if resp, cn := ask("c"); resp.StatusCode != 200 || cn != "first" {
		t.Errorf("the connection opened before the reload: %d on %q, want 200 on first", resp.StatusCode, cn)
	}
}
