package redis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// TestTLS: with Options.TLS every connection uses TLS. redis-server must be
// built with TLS (Debian's is); otherwise the test skips.
func TestTLS(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	pool := writeCert(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv, err := redistest.StartServer(redistest.ServerOptions{Args: []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", filepath.Join(dir, "cert.pem"),
		"--tls-key-file", filepath.Join(dir, "key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "cert.pem"),
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

// writeCert writes a self-signed certificate for 127.0.0.1 and its key to
// dir (cert.pem, key.pem) and returns a pool trusting it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}
