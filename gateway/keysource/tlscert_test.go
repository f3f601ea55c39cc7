package keysource

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/sluice-gw/sluice/httplimit"
)

// certRequest is a request that carries a verified client certificate, as
// the gateway's requests over TLS do.
type certRequest struct {
	httplimit.Request
	cert *x509.Certificate
}

func (r certRequest) ClientCertificate() *x509.Certificate { return r.cert }

func TestParseClientCert(t *testing.T) {
	for _, tt := range []struct {
		spec, want, err string
	}{
		{spec: "client_cert:subject", want: "client_cert:subject"},
		{spec: "client_cert: cn ", want: "client_cert:cn"},
		{spec: "client_cert:CN", err: `key "client_cert:CN": unknown client certificate field "CN" (allowed: subject, cn)`},
		{spec: "client_cert:serial", err: `key "client_cert:serial": unknown client certificate field "serial" (allowed: subject, cn)`},
		{spec: "client_cert:", err: `key "client_cert:": unknown client certificate field "" (allowed: subject, cn)`},
		{spec: "client_cert", err: `unknown key "client_cert" (allowed: ` + allForms + `)`},
		{spec: "client-cert:cn", err: `unknown key "client-cert:cn" (allowed: ` + allForms + `)`},
	} {
		kp, err := Parse(tt.spec)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err || !errors.Is(err, httplimit.ErrInvalidKey) {
				t.Errorf("Parse(%q) error %v, want %s (wrapping ErrInvalidKey)", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || kp.Source != httplimit.SourceFunc || kp.String() != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tt.spec, kp, err, tt.want)
		}
	}
}

// TestClientCert: the values of client_cert:subject and client_cert:cn,
// and "" for a request without a certificate or that cannot carry one.
func TestClientCert(t *testing.T) {
	subject, err := Parse("client_cert:subject")
	if err != nil {
		t.Fatal(err)
	}
	cn, err := Parse("client_cert:cn")
	if err != nil {
		t.Fatal(err)
	}
	plain := httplimit.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	alice := &x509.Certificate{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"payments"}, Organization: []string{"Acme"}}}
	noCN := &x509.Certificate{Subject: pkix.Name{Organization: []string{"Acme"}}}
	for _, tt := range []struct {
		name        string
		r           httplimit.Request
		subject, cn string
	}{
		{name: "certificate", r: certRequest{plain, alice}, subject: "CN=alice,OU=payments,O=Acme", cn: "alice"},
		{name: "certificate without a common name", r: certRequest{plain, noCN}, subject: "O=Acme", cn: ""},
		{name: "no certificate", r: certRequest{plain, nil}},
		{name: "a request that cannot carry one", r: plain},
	} {
		if got := valueOf(t, subject, tt.r); got != tt.subject {
			t.Errorf("%s: client_cert:subject = %q, want %q", tt.name, got, tt.subject)
		}
		if got := valueOf(t, cn, tt.r); got != tt.cn {
			t.Errorf("%s: client_cert:cn = %q, want %q", tt.name, got, tt.cn)
		}
	}
}
