package config

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testcert"
)

// tlsDir holds the certificate files the server.tls fixtures of
// testdata/check name. tlsFixtures writes them: no key is committed.
const tlsDir = "testdata/check/tls"

var tlsOnce sync.Once

// tlsFixtures writes, unless a previous run left them whole, into tlsDir:
// ca.pem (a CA), cert.pem and key.pem (a leaf of the CA for localhost and
// api.example, and its key), other-cert.pem and other-key.pem (another
// leaf, for www.example, and its key), and client-ca.pem (a second CA).
func tlsFixtures(t *testing.T) {
	t.Helper()
	tlsOnce.Do(func() {
		in := func(name string) string { return filepath.Join(tlsDir, name) }
		_, err1 := tls.LoadX509KeyPair(in("cert.pem"), in("key.pem"))
		_, err2 := tls.LoadX509KeyPair(in("other-cert.pem"), in("other-key.pem"))
		_, err3 := LoadCertPool(in("ca.pem"))
		_, err4 := LoadCertPool(in("client-ca.pem"))
		if err1 == nil && err2 == nil && err3 == nil && err4 == nil {
			return
		}
		ca := testcert.NewCA(t, "fixture CA")
		ca.WriteCert(t, in("ca.pem"))
		ca.Issue(t, pkix.Name{CommonName: "localhost"}, "localhost", "api.example").Write(t, in("cert.pem"), in("key.pem"))
		ca.Issue(t, pkix.Name{CommonName: "www.example"}, "www.example").Write(t, in("other-cert.pem"), in("other-key.pem"))
		testcert.NewCA(t, "client CA").WriteCert(t, in("client-ca.pem"))
	})
}

// TestLoadKeyPair: each way a key pair fails names the file at fault and
// says why; a good pair loads.
func TestLoadKeyPair(t *testing.T) {
	tlsFixtures(t)
	dir := t.TempDir()
	in := func(name string) string { return filepath.Join(tlsDir, name) }
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, cert, key, field, msg string
	}{
		{"missing cert", in("nope.pem"), in("key.pem"), "cert_file", `cannot read "testdata/check/tls/nope.pem": no such file`},
		{"missing key", in("cert.pem"), in("nope.pem"), "key_file", `cannot read "testdata/check/tls/nope.pem": no such file`},
		{"directory", tlsDir, in("key.pem"), "cert_file", `cannot read "testdata/check/tls": it is a directory, not a PEM file`},
		{"empty cert", empty, in("key.pem"), "cert_file", "holds no PEM certificate"},
		{"text key", in("cert.pem"), in("not-pem.txt"), "key_file", "holds no PEM private key"},
		{"swapped", in("key.pem"), in("cert.pem"), "cert_file", "are cert_file and key_file swapped?"},
		{"key is a certificate", in("cert.pem"), in("other-cert.pem"), "key_file", "are cert_file and key_file swapped?"},
		{"mismatch", in("cert.pem"), in("other-key.pem"), "key_file",
			`the private key in "testdata/check/tls/other-key.pem" does not match the certificate in "testdata/check/tls/cert.pem"`},
	} {
		_, err := LoadKeyPair(Certificate{CertFile: tt.cert, KeyFile: tt.key})
		var fe *FileError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Err.Error(), tt.msg) {
			t.Errorf("%s: LoadKeyPair error %v, want a FileError for %s containing %q", tt.name, err, tt.field, tt.msg)
		}
	}
	pair, err := LoadKeyPair(Certificate{CertFile: in("cert.pem"), KeyFile: in("key.pem")})
	if err != nil || pair.Leaf == nil || pair.Leaf.Subject.CommonName != "localhost" || len(pair.Certificate) != 2 {
		t.Errorf("LoadKeyPair of a good pair: %v (leaf %v, chain of %d)", err, pair.Leaf, len(pair.Certificate))
	}
}

// TestLoadKeyPairPermission: a file that cannot be opened says so. Root
// reads every file, so the test needs another user.
func TestLoadKeyPairPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	tlsFixtures(t)
	key := filepath.Join(t.TempDir(), "key.pem")
	data, err := os.ReadFile(filepath.Join(tlsDir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, data, 0o000); err != nil {
		t.Fatal(err)
	}
	_, err = LoadKeyPair(Certificate{CertFile: filepath.Join(tlsDir, "cert.pem"), KeyFile: key})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Field != "key_file" || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("LoadKeyPair of an unreadable key: %v", err)
	}
}

// TestTLSRelativePaths: Load resolves server.tls's relative paths against
// the config file's directory, not the working directory, and leaves an
// absolute path alone.
func TestTLSRelativePaths(t *testing.T) {
	tlsFixtures(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cert.pem", "key.pem"} {
		data, err := os.ReadFile(filepath.Join(tlsDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "certs", f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := filepath.Abs(filepath.Join(tlsDir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sluice.yaml")
	yaml := "server:\n  tls:\n    listen: :8443\n    certificates: [{cert_file: certs/cert.pem, key_file: ./certs/key.pem}]\n    client_ca: " + ca +
		"\nroutes:\n  - {id: a, match: {path: /a}, upstream: \"http://127.0.0.1:1\"}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := c.Server.TLS
	want := []string{filepath.Join(dir, "certs", "cert.pem"), filepath.Join(dir, "certs", "key.pem"), ca}
	if got := tc.Files(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Files() = %q, want %q", got, want)
	}
	if tc.ClientAuth != ClientAuthRequire || tc.MinVersion != "1.2" || tc.Version() != tls.VersionTLS12 || tc.Plaintext != PlaintextServe {
		t.Errorf("defaults: client_auth %q, min_version %q (%x), plaintext %q", tc.ClientAuth, tc.MinVersion, tc.Version(), tc.Plaintext)
	}
	if h := c.Server.HTTP2; h.MaxConcurrentStreams != 100 || h.H2C {
		t.Errorf("http2 defaults: %+v", h)
	}
	// From the working directory the relative paths name nothing.
	if _, err := Parse("sluice.yaml", []byte(yaml), nil); err == nil || !strings.Contains(err.Error(), `cannot read "certs/cert.pem": no such file`) {
		t.Errorf("Parse from the working directory: %v", err)
	}
}

// TestTLSValidateInGo: a Config built in Go with a server.tls section is
// checked too, its paths taken as they are.
func TestTLSValidateInGo(t *testing.T) {
	tlsFixtures(t)
	c := &Config{
		Server: Server{TLS: &TLS{Listen: ":8443", Certificates: []Certificate{{CertFile: filepath.Join(tlsDir, "cert.pem"), KeyFile: filepath.Join(tlsDir, "other-key.pem")}},
			MinVersion: "1.3", ClientAuth: ClientAuthOptional}},
		Routes: []Route{{ID: "a", Match: Match{Path: "/a"}, Upstream: "http://127.0.0.1:1"}},
	}
	ApplyDefaults(c)
	err := c.Validate()
	for _, want := range []string{
		"server.tls.certificates[0].key_file: the private key in",
		`server.tls.client_auth: client_auth "optional" needs client_ca`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to contain %q", err, want)
		}
	}
	c.Server.TLS.Certificates[0].KeyFile = filepath.Join(tlsDir, "key.pem")
	c.Server.TLS.ClientAuth = ""
	if err := c.Validate(); err != nil {
		t.Errorf("Validate of a good server.tls: %v", err)
	}
	if c.Server.TLS.Version() != tls.VersionTLS13 {
		t.Errorf("Version() = %x, want TLS 1.3", c.Server.TLS.Version())
	}
}

// TestTLSValidityWarnings: a certificate that has expired, or is not valid
// yet, loads with a warning at its cert_file; a valid one gives none.
func TestTLSValidityWarnings(t *testing.T) {
	ca := testcert.NewCA(t, "validity CA")
	dir := t.TempDir()
	now := time.Now()
	write := func(name string, leaf *testcert.Leaf) {
		leaf.Write(t, filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
	}
	write("expired", ca.IssueValid(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour), pkix.Name{CommonName: "old"}))
	write("future", ca.IssueValid(t, now.Add(24*time.Hour), now.Add(48*time.Hour), pkix.Name{CommonName: "new"}))
	write("good", ca.Issue(t, pkix.Name{CommonName: "good"}))
	file := filepath.Join(dir, "sluice.yaml")
	yaml := "server:\n  tls:\n    listen: :8443\n    certificates:\n" +
		"      - {cert_file: good.pem, key_file: good-key.pem}\n" +
		"      - {cert_file: expired.pem, key_file: expired-key.pem}\n" +
		"      - {cert_file: future.pem, key_file: future-key.pem}\n" +
		"routes:\n  - {id: a, match: {path: /a}, upstream: \"http://127.0.0.1:1\"}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if len(w) != 2 {
		t.Fatalf("warnings: %v, want two", w)
	}
	if w[0].Line != 6 || w[0].Path != "server.tls.certificates[1].cert_file" || !strings.Contains(w[0].Message, "expired.pem\" expired at ") {
		t.Errorf("first warning: %v", w[0])
	}
	if w[1].Line != 7 || w[1].Path != "server.tls.certificates[2].cert_file" || !strings.Contains(w[1].Message, "future.pem\" is not valid before ") {
		t.Errorf("second warning: %v", w[1])
	}
}
