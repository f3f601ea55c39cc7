package redis

import (
	"context"
	"crypto/tls"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// TestTLS: with Options.TLS every connection uses TLS. redis-server must be
// built with TLS (Debian's is); otherwise the test skips.
func TestTLS(t *testing.T) {
	redistest.Require(t)
	certFile, keyFile, pool := testcert.SelfSigned(t, t.TempDir())
	port := testkit.FreePorts(t, 1)[0]
	srv, err := redistest.StartServer(redistest.ServerOptions{Args: []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", certFile,
		"--tls-key-file", keyFile,
		"--tls-ca-cert-file", certFile,
		"--tls-auth-clients", "no",
	}})
	if err != nil {
		t.Skipf("redis-server does not start with TLS (built without it?): %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	req := []ratelimit.Request{{Key: "k", Policy: tbPolicy}}
	out := make([]ratelimit.Decision, 1)

	s := mustNew(t, Options{Addrs: []string{addr}, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if ok, err := s.Evaluate(context.Background(), req, out); err != nil || !ok {
		t.Fatalf("Evaluate over TLS = %v, %v; want admitted", ok, err)
	}
	plain := mustNew(t, Options{Addrs: []string{addr}, Timeout: 500 * time.Millisecond})
	if _, err := plain.Evaluate(context.Background(), req, out); err == nil {
		t.Fatal("Evaluate without TLS on the TLS port succeeded")
	}
	untrusted := mustNew(t, Options{Addrs: []string{addr}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}, Timeout: 5 * time.Second})
	if _, err := untrusted.Evaluate(context.Background(), req, out); ErrorKind(err) != "connection" {
		t.Fatalf("Evaluate with an untrusted certificate: %v (kind %q), want a connection error", err, ErrorKind(err))
	}
}
