// Package tlsconf is the certificate store of the HTTPS listener
// (server.tls): it loads the configured certificates and client CAs,
// chooses a certificate for each handshake by the name the client asks for
// (SNI), and swaps in new files, on a reload or when they change on disk,
// for the handshakes that follow, without touching open connections. A
// failed load keeps the certificates in force.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/watch"
)

// Store holds the certificates and client CAs of one server.tls section.
// Its methods are safe for concurrent use.
type Store struct {
	log   *slog.Logger
	state atomic.Pointer[state]

	// mu serializes loads (Reload, and a watcher's reload) and guards the
	// fields below.
	mu       sync.Mutex
	watching bool                      // Watch is running
	watchers map[string]*watch.Watcher // by file, while watching
	closing  sync.WaitGroup            // watchers stopping in the background

	// debounce and settle are the watchers' options; zero means
	// watch's defaults. Tests shorten them.
	debounce, settle time.Duration
}

// state is what one load read: the handshakes started while it is in
// force use it whole.
type state struct {
	conf       config.TLS // the section it was read from
	certs      []tls.Certificate
	clientCAs  *x509.CertPool // nil without client_ca
	clientAuth tls.ClientAuthType
	minVersion uint16
}

// New loads c's certificates and client CAs. c must be valid
// ([config.Config.Validate]); its paths are opened as they are (a Config
// from config.Load has them resolved against the file's directory). A file
// that cannot be loaded is an error naming it. log receives the outcomes
// of the reloads Watch makes; nil discards them.
func New(c *config.TLS, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := load(c)
	if err != nil {
		return nil, err
	}
	s := &Store{log: log, watchers: map[string]*watch.Watcher{}}
	s.state.Store(st)
	return s, nil
}

// load reads every file c names. Its error lists every file that failed,
// each under its server.tls key.
func load(c *config.TLS) (*state, error) {
	if c == nil {
		return nil, errors.New("tlsconf: no server.tls section")
	}
	if len(c.Certificates) == 0 {
		return nil, errors.New("tlsconf: server.tls.certificates: at least one certificate is required")
	}
	st := &state{conf: *c, minVersion: c.Version(), clientAuth: tls.NoClientCert}
	st.conf.Certificates = slices.Clone(c.Certificates)
	var errs []error
	for i, cert := range c.Certificates {
		pair, err := config.LoadKeyPair(cert)
		if err != nil {
			errs = append(errs, prefixed(fmt.Sprintf("server.tls.certificates[%d]", i), err))
			continue
		}
		st.certs = append(st.certs, pair)
	}
	if c.ClientCA != "" {
		pool, err := config.LoadCertPool(c.ClientCA)
		if err != nil {
			errs = append(errs, prefixed("server.tls", err))
		}
		st.clientCAs = pool
		st.clientAuth = tls.RequireAndVerifyClientCert
		if c.ClientAuth == config.ClientAuthOptional {
			st.clientAuth = tls.VerifyClientCertIfGiven
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return st, nil
}

// prefixed puts path before each problem of err ("server.tls.certificates[0].key_file: ...").
func prefixed(path string, err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, prefixed(path, e))
		}
		return errors.Join(out...)
	}
	return fmt.Errorf("%s.%w", path, err)
}

// TLSConfig returns the listener's TLS configuration: Go's defaults (no
// cipher list of sluice's own), NextProtos h2 and http/1.1, and a
// GetConfigForClient that gives each handshake the certificates, client
// CAs, client authentication and minimum version in force when it
// starts. A resumed session's client certificate chains are checked
// against the client CAs in force too (crypto/tls does so with the
// handshake's configuration), so a reload that drops a CA ends its
// sessions' resumption. Each handshake's configuration is a clone of the one returned,
// so fields the caller sets on it (NextProtos, say) apply, as long as they
// are set before it serves; a clone made of it by the caller does not
// carry later changes. An open connection keeps what its handshake used.
func (s *Store) TLSConfig() *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := s.state.Load()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates = nil
		c.GetCertificate = st.certificate
		c.MinVersion = st.minVersion
		c.ClientCAs = st.clientCAs
		c.ClientAuth = st.clientAuth
		return c, nil
	}
	// Without GetConfigForClient (a caller that clears it) the listener
	// still serves the certificates in force.
	base.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return s.state.Load().certificate(hello)
	}
	return base
}

// certificate chooses the certificate for a handshake: the first whose
// names and key the client accepts (SNI, signature algorithms), or the
// first certificate when none is.
func (st *state) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if len(st.certs) > 1 {
		for i := range st.certs {
			if hello.SupportsCertificate(&st.certs[i]) == nil {
				return &st.certs[i], nil
			}
		}
	}
	return &st.certs[0], nil
}

// Certificates returns the leaf certificates in force, in the order of
// server.tls.certificates.
func (s *Store) Certificates() []*x509.Certificate {
	st := s.state.Load()
	out := make([]*x509.Certificate, len(st.certs))
	for i, c := range st.certs {
		out[i] = c.Leaf
	}
	return out
}

// Reload loads c, a new server.tls section, and puts it in force for the
// handshakes that follow. When a file cannot be loaded, the certificates
// in force stay and the error names every file that failed. While Watch
// runs, the files watched follow c.
func (s *Store) Reload(c *config.TLS) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := load(c)
	if err != nil {
		return err
	}
	s.state.Store(st)
	if s.watching {
		s.follow(st.conf.Files())
	}
	return nil
}

// reloadFiles reads the files of the section in force again: a watched
// file changed. It logs the outcome.
func (s *Store) reloadFiles(file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.watching {
		return
	}
	conf := s.state.Load().conf
	st, err := load(&conf)
	if err != nil {
		s.log.Error("TLS files changed but do not load; keeping the certificates in force", "file", file, "error", err)
		return
	}
	s.state.Store(st)
	s.log.Info("TLS certificates reloaded", "file", file, "certificates", len(st.certs))
}

// Watch reloads the certificates and client CAs when their files change on
// disk, until ctx is done; then it stops watching and returns. It watches
// the files' directories (watch.Start), so that a file replaced by a
// rename and a Kubernetes Secret volume's symlink swap are both seen;
// bursts of events are debounced, and a change that leaves a file's
// content as it was reloads nothing. A reload that fails is logged and
// keeps the certificates in force; a file that cannot be watched is
// logged. Watch is called at most once per Store.
func (s *Store) Watch(ctx context.Context) {
	s.mu.Lock()
	s.watching = true
	s.follow(s.state.Load().conf.Files())
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	s.watching = false
	all := s.watchers
	s.watchers = map[string]*watch.Watcher{}
	s.mu.Unlock()
	for _, w := range all {
		w.Close() //nolint:errcheck // nothing to do about it
	}
	s.closing.Wait()
}

// follow watches files and stops watching the others. s.mu is held. A
// watcher stops in the background: it may be the one whose change is
// being reloaded, waiting for s.mu.
func (s *Store) follow(files []string) {
	want := map[string]bool{}
	for _, f := range files {
		want[f] = true
		if s.watchers[f] != nil {
			continue
		}
		w, err := watch.Start(watch.Options{
			File:     f,
			Debounce: s.debounce,
			Settle:   s.settle,
			OnChange: func() { s.reloadFiles(f) },
			Logger:   s.log.With("section", "server.tls"),
		})
		if err != nil {
			s.log.Warn("cannot watch a TLS file; it is read again only on reload", "file", f, "error", err)
			continue
		}
		s.watchers[f] = w
	}
	for f, w := range s.watchers {
		if !want[f] {
			delete(s.watchers, f)
			s.closing.Go(func() { w.Close() }) //nolint:errcheck // nothing to do about it
		}
	}
}
