package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamTLSRelativePaths: upstream_tls's relative paths are
// resolved against the configuration file's directory; absolute ones are
// kept.
func TestUpstreamTLSRelativePaths(t *testing.T) {
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
	yaml := "routes:\n  - id: a\n    match: {path: /a}\n    upstream: \"h2://127.0.0.1:1\"\n" +
		"    upstream_tls: {ca_file: " + ca + ", cert_file: certs/cert.pem, key_file: ./certs/key.pem}\n" +
		"server: {http2: {h2c: true}}\n"
	c, err := Parse(filepath.Join(dir, "sluice.yaml"), []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	ut := c.Routes[0].UpstreamTLS
	got := []string{ut.CAFile, ut.CertFile, ut.KeyFile}
	want := []string{ca, filepath.Join(dir, "certs", "cert.pem"), filepath.Join(dir, "certs", "key.pem")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("paths = %q, want %q", got, want)
	}
	if _, err := Parse("sluice.yaml", []byte(yaml), nil); err == nil || !strings.Contains(err.Error(), `cannot read "certs/cert.pem": no such file`) {
		t.Errorf("Parse from the working directory: %v", err)
	}
}

// TestHTTP2UpstreamUnreachable: an h2c:// or h2:// upstream with neither
// server.tls nor server.http2.h2c is warned of (only those listeners reach
// it); with h2c on, or for an http:// upstream, nothing is said.
func TestHTTP2UpstreamUnreachable(t *testing.T) {
	for _, tt := range []struct {
		upstream string
		h2c      bool
		warn     bool
	}{
		{"h2c://127.0.0.1:1", false, true},
		{"h2://127.0.0.1:1", false, true},
		{"h2c://127.0.0.1:1", true, false},
		{"http://127.0.0.1:1", false, false},
	} {
		c := &Config{Routes: []Route{{ID: "a", Match: Match{Path: "/a"}, Upstream: tt.upstream}}}
		c.Server.HTTP2.H2C = tt.h2c
		ApplyDefaults(c)
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.upstream, err)
		}
		w := c.Warnings().Error()
		if got := strings.Contains(w, "HTTP/2-only") && strings.Contains(w, "505"); got != tt.warn {
			t.Errorf("%s, h2c %v: warned %v, want %v (%q)", tt.upstream, tt.h2c, got, tt.warn, w)
		}
	}
}

// TestUpstreamTLSClientConfig: the client configuration carries the CA
// pool, the server name and the client certificate; a file that cannot be
// loaded is a *FileError naming its field.
func TestUpstreamTLSClientConfig(t *testing.T) {
	tlsFixtures(t)
	in := func(name string) string { return filepath.Join(tlsDir, name) }
	tc, err := (&UpstreamTLS{CAFile: in("ca.pem"), ServerName: "api.example", CertFile: in("cert.pem"), KeyFile: in("key.pem")}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || tc.ServerName != "api.example" || len(tc.Certificates) != 1 {
		t.Errorf("ClientConfig = RootCAs %v, ServerName %q, %d certificates", tc.RootCAs != nil, tc.ServerName, len(tc.Certificates))
	}
	if tc, err := (&UpstreamTLS{}).ClientConfig(); err != nil || tc.RootCAs != nil || len(tc.Certificates) != 0 {
		t.Errorf("empty upstream_tls: %v, %v", tc, err)
	}
	for _, tt := range []struct {
		ut    UpstreamTLS
		field string
	}{
		{UpstreamTLS{CAFile: in("missing.pem")}, "ca_file"},
		{UpstreamTLS{CAFile: in("not-pem.txt")}, "ca_file"},
		{UpstreamTLS{CertFile: in("cert.pem"), KeyFile: in("other-key.pem")}, "key_file"},
		{UpstreamTLS{CertFile: in("missing.pem"), KeyFile: in("key.pem")}, "cert_file"},
	} {
		_, err := tt.ut.ClientConfig()
		var fe *FileError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%+v: error %v, want a FileError of %s", tt.ut, err, tt.field)
		}
	}
}
