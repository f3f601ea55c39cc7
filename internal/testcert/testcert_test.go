package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"testing"
)

// TestSelfSigned: a TLS server with the certificate is trusted by the pool
// for 127.0.0.1, and not by an empty one.
func TestSelfSigned(t *testing.T) {
	certFile, keyFile, pool := SelfSigned(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.WriteString(c, "ok"); c.Close() }()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = io.ReadAll(c)
		return err
	}
	if err := dial(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err != nil {
		t.Errorf("dial trusting the pool: %v", err)
	}
	if err := dial(&tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}); err == nil {
		t.Error("dial trusting nothing succeeded")
	}
}
