package keysource

import (
	"crypto/x509"
	"fmt"

	"github.com/sluice-gw/sluice/httplimit"
)

func init() { Register("client_cert:FIELD", parseClientCert) }

// ClientCertificater is implemented by a request that arrived over TLS:
// ClientCertificate returns the client's certificate as the TLS handshake
// verified it (the leaf of the verified chain), or nil when the client sent
// none, the request came in cleartext, or no client CA is configured. The
// "client_cert:FIELD" key parts read it; a request that does not implement
// it has no client certificate.
type ClientCertificater interface {
	ClientCertificate() *x509.Certificate
}

// clientCertFields are the fields "client_cert:FIELD" reads, by name.
var clientCertFields = map[string]func(*x509.Certificate) string{
	// subject is the whole subject, as crypto/x509/pkix.Name.String
	// writes it: "CN=alice,OU=payments,O=Acme".
	"subject": func(c *x509.Certificate) string { return c.Subject.String() },
	// cn is the subject's common name.
	"cn": func(c *x509.Certificate) string { return c.Subject.CommonName },
}

// parseClientCert parses the argument of "client_cert:FIELD": subject or
// cn. The part's value is that field of the request's verified client
// certificate, "" when there is none (the limit's on_empty_key applies).
func parseClientCert(field string) (httplimit.KeyPart, error) {
	get, ok := clientCertFields[field]
	if !ok {
		return httplimit.KeyPart{}, fmt.Errorf("unknown client certificate field %q (allowed: subject, cn)", field)
	}
	return httplimit.FuncKeyPart("client_cert:"+field, func(r httplimit.Request) string {
		if c := clientCertificate(r); c != nil {
			return get(c)
		}
		return ""
	}), nil
}

// clientCertificate returns r's verified client certificate, or nil.
func clientCertificate(r httplimit.Request) *x509.Certificate {
	if cc, ok := r.(ClientCertificater); ok {
		return cc.ClientCertificate()
	}
	return nil
}
