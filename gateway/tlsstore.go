package gateway

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/sluice-gw/sluice/gateway/config"
)

// tlsStore is a provisional certificate store: loaded at start and on Reload.
type tlsStore struct {
	log  *slog.Logger
	cert atomic.Pointer[[]tls.Certificate]
}

func newTLSStore(c *config.TLS, log *slog.Logger) (*tlsStore, error) {
	s := &tlsStore{log: log}
	return s, s.Reload(c)
}

func (s *tlsStore) Reload(c *config.TLS) error {
	var certs []tls.Certificate
	for _, cf := range c.Certificates {
		cert, err := tls.LoadX509KeyPair(cf.CertFile, cf.KeyFile)
		if err != nil {
			return err
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return errors.New("no certificate")
	}
	s.cert.Store(&certs)
	return nil
}

func (s *tlsStore) Watch(stop <-chan struct{}) {}

func (s *tlsStore) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			certs := *s.cert.Load()
			for i := range certs {
				if hello.SupportsCertificate(&certs[i]) == nil {
					return &certs[i], nil
				}
			}
			return &certs[0], nil
		},
	}
}
