package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/sluicetest"
	"github.com/sluice-gw/sluice/internal/testcert"
)

// tlsUpstream answers over TLS: an Upgrade request with 101 and then an
// echo of each line, upper-cased; any other request with what it saw.
func tlsUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") == "echo" {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(c, strings.ToUpper(line))
		}
	}
	fmt.Fprintf(w, "path=%s tls=%v proto=%s", r.URL.Path, r.TLS != nil, r.Header.Get("X-Forwarded-Proto"))
}

// upgradeEcho sends an Upgrade request for path to the gateway at base and,
// when it is switched, one line through the pipe; it returns the status and
// the echoed line.
func upgradeEcho(t *testing.T, base, path string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", path)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("upgrade %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	io.WriteString(c, "over tls\n")
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("upgrade %s: echo: %v", path, err)
	}
	return resp.StatusCode, line
}

// TestTLSUpstream: a route to an https:// upstream proxies over TLS,
// verified against the system's roots (here a private root added with
// SSL_CERT_FILE, as an operator adds one); an Upgrade request reaches it
// over TLS too. An upstream whose certificate those roots do not vouch for
// gets a 502 on both paths, never an unverified connection.
func TestTLSUpstream(t *testing.T) {
	certFile, keyFile, _ := testcert.SelfSigned(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	good := httptest.NewUnstartedServer(http.HandlerFunc(tlsUpstream))
	good.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	good.StartTLS()
	defer good.Close()
	// httptest's own certificate, from a CA the gateway does not trust.
	untrusted := httptest.NewTLSServer(http.HandlerFunc(tlsUpstream))
	defer untrusted.Close()

	path := writeConfig(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
routes:
  - id: good
    match: {path: /good/**}
    upstream: %s
  - id: untrusted
    match: {path: /untrusted/**}
    upstream: %s
`, good.URL, untrusted.URL))
	sp, err := sluicetest.Start(binary, sluicetest.Options{
		Args: []string{"serve", "--config", path},
		Env:  append(os.Environ(), "SSL_CERT_FILE="+certFile, "SSL_CERT_DIR="+t.TempDir()),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		client.CloseIdleConnections()
		if code := sp.Stop(20 * time.Second); code != 0 {
			t.Errorf("sluice exited with %d after SIGTERM, want 0", code)
		}
		if t.Failed() {
			t.Logf("sluice logs:\n%s", sp.Logs())
		}
	}()

	for range 2 { // the second request reuses the pooled TLS connection
		r := get(t, sp.Base+"/good/items")
		if r.code != http.StatusOK || r.body != "path=/good/items tls=true proto=http" {
			t.Fatalf("GET over a TLS upstream: %d %q, want 200 path=/good/items tls=true proto=http", r.code, r.body)
		}
	}
	if status, line := upgradeEcho(t, sp.Base, "/good/ws"); status != http.StatusSwitchingProtocols || line != "OVER TLS\n" {
		t.Errorf("Upgrade over a TLS upstream: %d, echo %q; want 101 and OVER TLS", status, line)
	}
	if r := get(t, sp.Base+"/untrusted/items"); r.code != http.StatusBadGateway {
		t.Errorf("GET to an upstream with an untrusted certificate: %d %q, want 502", r.code, r.body)
	}
	if status, _ := upgradeEcho(t, sp.Base, "/untrusted/ws"); status != http.StatusBadGateway {
		t.Errorf("Upgrade to an upstream with an untrusted certificate: %d, want 502", status)
	}
}
