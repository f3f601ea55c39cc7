// Package testcert writes the TLS certificates tests need: one
// self-signed certificate for 127.0.0.1 that is its own root, so a test can
// serve TLS with it and trust it, by a pool or by SSL_CERT_FILE; and a
// certificate authority ([NewCA]) that issues leaf certificates for several
// names, usable by servers and clients alike (mutual TLS).
package testcert

import (
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
	"testing"
	"time"
)

// SelfSigned writes a self-signed certificate for 127.0.0.1, valid for an
// hour either side of now, and its key to dir as cert.pem and key.pem. It
// returns both paths and a pool that trusts the certificate.
func SelfSigned(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
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
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, pool
}

// serial returns a random certificate serial number.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}

// CA is a certificate authority for tests: a self-signed ECDSA P-256 root,
// valid for an hour either side of now.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the root certificate, PEM-encoded.
	PEM []byte
}

// NewCA returns a new certificate authority whose subject's common name
// is name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"sluice tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool that trusts the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// WriteCert writes the CA's certificate to file (PEM).
func (ca *CA) WriteCert(t testing.TB, file string) {
	t.Helper()
	if err := os.WriteFile(file, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Leaf is a certificate the CA issued and its private key.
type Leaf struct {
	Cert *x509.Certificate
	// CertPEM is the certificate followed by the CA's: a chain, leaf first.
	CertPEM []byte
	// KeyPEM is the private key, PKCS #8.
	KeyPEM []byte
}

// Issue returns a new leaf certificate with the subject, for servers and
// clients alike, valid for an hour either side of now. names are its
// subject alternative names: each an IP address or a DNS name ("*.example"
// wildcards allowed).
func (ca *CA) Issue(t testing.TB, subject pkix.Name, names ...string) *Leaf {
	t.Helper()
	return ca.IssueValid(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), subject, names...)
}

// IssueValid is Issue with the validity period from notBefore to notAfter:
// an expired certificate, or one not valid yet.
func (ca *CA) IssueValid(t testing.TB, notBefore, notAfter time.Time, subject pkix.Name, names ...string) *Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.PEM...)
	return &Leaf{Cert: cert, CertPEM: chain, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})}
}

// TLS returns the leaf as a tls.Certificate, for a client or a server
// configured in Go.
func (l *Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write writes the certificate chain to certFile and the key to keyFile,
// each replaced in one rename, so that a reader never sees half a file.
func (l *Leaf) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	WriteFile(t, certFile, l.CertPEM)
	WriteFile(t, keyFile, l.KeyPEM)
}

// WriteFile writes data to file through a temporary file in the same
// directory renamed over it: the way a certificate manager replaces a
// file atomically.
func WriteFile(t testing.TB, file string, data []byte) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(file), ".testcert-*")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		t.Fatal(werr, cerr)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		t.Fatal(err)
	}
}
