package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"os"
	"path/filepath"
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

// TestCA: a server with a leaf the CA issued for several names is trusted
// by the CA's pool for each of them and for no other, and a client
// certificate from the CA is verified by a server trusting the CA and
// refused by one trusting another CA.
func TestCA(t *testing.T) {
	ca := NewCA(t, "test CA")
	server := ca.Issue(t, pkix.Name{CommonName: "server"}, "a.example", "*.b.example", "127.0.0.1")
	client := ca.Issue(t, pkix.Name{CommonName: "alice", Organization: []string{"acme"}})
	other := NewCA(t, "other CA")

	serve := func(clientCAs *x509.CertPool) string {
		cfg := &tls.Config{Certificates: []tls.Certificate{server.TLS(t)}}
		if clientCAs != nil {
			cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					if err := c.(*tls.Conn).Handshake(); err != nil {
						return
					}
					cs := c.(*tls.Conn).ConnectionState()
					name := "-"
					if len(cs.PeerCertificates) > 0 {
						name = cs.PeerCertificates[0].Subject.String()
					}
					io.WriteString(c, name)
				}()
			}
		}()
		return ln.Addr().String()
	}
	dial := func(addr string, cfg *tls.Config) (string, error) {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		return string(b), err
	}

	addr := serve(nil)
	for _, name := range []string{"a.example", "x.b.example", "127.0.0.1"} {
		if _, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: name}); err != nil {
			t.Errorf("dial %s trusting the CA: %v", name, err)
		}
	}
	if _, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "c.example"}); err == nil {
		t.Error("dial for a name the leaf lacks succeeded")
	}
	if _, err := dial(addr, &tls.Config{RootCAs: other.Pool(), ServerName: "a.example"}); err == nil {
		t.Error("dial trusting another CA succeeded")
	}

	mtls := serve(ca.Pool())
	got, err := dial(mtls, &tls.Config{RootCAs: ca.Pool(), ServerName: "a.example", Certificates: []tls.Certificate{client.TLS(t)}})
	if err != nil || got != "CN=alice,O=acme" {
		t.Errorf("client certificate from the CA: %q, %v; want CN=alice,O=acme", got, err)
	}
	stranger := other.Issue(t, pkix.Name{CommonName: "mallory"})
	if got, err := dial(mtls, &tls.Config{RootCAs: ca.Pool(), ServerName: "a.example", Certificates: []tls.Certificate{stranger.TLS(t)}}); err == nil {
		t.Errorf("client certificate from another CA was accepted: %q", got)
	}

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	server.Write(t, certFile, keyFile)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Errorf("written leaf does not load: %v", err)
	}
	ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	if b, err := os.ReadFile(filepath.Join(dir, "ca.pem")); err != nil || !x509.NewCertPool().AppendCertsFromPEM(b) {
		t.Errorf("written CA does not load: %v", err)
	}
}
