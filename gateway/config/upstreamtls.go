package config

import (
	"crypto/tls"
	"errors"
	"net/netip"
	"net/url"
	"strings"
)

// The upstream URL schemes: HTTP/1.1 in cleartext and over TLS, HTTP/2 by
// prior knowledge in cleartext (h2c) and HTTP/2 over TLS (h2, chosen by
// ALPN, no HTTP/1.1 fallback).
const (
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
	SchemeH2C   = "h2c"
	SchemeH2    = "h2"
)

// SchemeTLS reports whether an upstream of scheme is spoken to over TLS
// (https and h2), the upstreams that upstream_tls applies to.
func SchemeTLS(scheme string) bool { return scheme == SchemeHTTPS || scheme == SchemeH2 }

// SchemeHTTP2 reports whether an upstream of scheme speaks HTTP/2 only (h2c
// and h2): the fasthttp engine, which serves cleartext HTTP/1.1, cannot
// forward to it (docs/operations.md, "gRPC").
func SchemeHTTP2(scheme string) bool { return scheme == SchemeH2C || scheme == SchemeH2 }

// upstreamScheme returns the scheme of route r's upstream: its upstream
// URL's, or its pool's first target's; "" when it has neither or it does
// not parse.
func upstreamScheme(r *Route) string {
	s := r.Upstream
	if s == "" && r.Pool != nil && len(r.Pool.Targets) > 0 {
		s = r.Pool.Targets[0]
	}
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Scheme
}

// resolvePaths makes t's relative file paths relative to dir, the
// configuration file's directory, as server.tls's are.
func (t *UpstreamTLS) resolvePaths(dir string) {
	for _, p := range []*string{&t.CAFile, &t.CertFile, &t.KeyFile} {
		if *p != "" {
			*p = resolve(dir, *p)
		}
	}
}

// resolveUpstreamTLS resolves the relative paths of every route's
// upstream_tls against dir.
func resolveUpstreamTLS(c *Config, dir string) {
	for i := range c.Routes {
		if t := c.Routes[i].UpstreamTLS; t != nil {
			t.resolvePaths(dir)
		}
	}
}

// upstreamTLS checks route r's upstream_tls (at p, the route's path):
// only on a route whose upstream is spoken to over TLS, its files read as
// the gateway reads them (LoadCertPool, LoadKeyPair), and server_name a
// host name or IP address. It also warns of an HTTP/2-only upstream that
// no listener of c can reach, since only the net/http engine (h2c and
// HTTPS) forwards to one.
func (v *validator) upstreamTLS(c *Config, p string, r *Route) {
	scheme := upstreamScheme(r)
	if SchemeHTTP2(scheme) && c.Server.TLS == nil && !c.Server.HTTP2.H2C {
		v.warnf(p+".upstream", "route %q forwards to an HTTP/2-only %s:// upstream, which only HTTPS and h2c requests reach: with neither server.tls nor server.http2.h2c, every request it takes is answered 505",
			r.ID, scheme)
	}
	t := r.UpstreamTLS
	if t == nil {
		return
	}
	tp := p + ".upstream_tls"
	switch {
	case r.Upstream == "" && r.Pool == nil:
		v.errf(tp, "upstream_tls applies only to routes with an upstream or pool")
		return
	case scheme == SchemeHTTP || scheme == SchemeH2C:
		v.errf(tp, "upstream_tls applies only to https:// and h2:// upstreams; route %q's upstream is %s://, spoken to in cleartext", r.ID, scheme)
		return
	}
	if t.CAFile != "" {
		if _, err := LoadCertPool(t.CAFile); err != nil {
			var fe *FileError
			if errors.As(err, &fe) {
				err = fe.Err
			}
			v.errf(tp+".ca_file", "%v", err)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.errf(tp+".key_file", "key_file is required with cert_file: the client certificate's private key, PEM")
	case t.CertFile == "" && t.KeyFile != "":
		v.errf(tp+".cert_file", "cert_file is required with key_file: the client certificate chain, PEM, leaf first")
	case t.CertFile != "":
		if _, err := LoadKeyPair(Certificate{CertFile: t.CertFile, KeyFile: t.KeyFile}); err != nil {
			v.fileErr(tp, err)
		}
	}
	if n := t.ServerName; n != "" && !validServerName(n) {
		v.errf(tp+".server_name", "server_name %q is not a host name or IP address (no scheme, port or path)", n)
	}
}

// validServerName reports whether s is a DNS host name (labels of 1 to 63
// letters, digits and '-', not starting or ending with '-', 253 bytes at
// most, one trailing dot allowed) or an IP address.
func validServerName(s string) bool {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Zone() == ""
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			switch c := label[i]; {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
			default:
				return false
			}
		}
	}
	return true
}

// upstreamTLSEffective writes route r's upstream_tls for Effective, at
// the route's fields' indent.
func (w *yamlWriter) upstreamTLSEffective(r *Route) {
	t := r.UpstreamTLS
	if t == nil {
		return
	}
	w.line(2, "upstream_tls:")
	w.kv(3, "ca_file", quote(t.CAFile))
	w.kv(3, "server_name", quote(t.ServerName))
	w.kv(3, "cert_file", quote(t.CertFile))
	w.kv(3, "key_file", quote(t.KeyFile))
}

// Key names t's settings among connection pools: two routes whose
// upstream_tls have the same files and server name share a pool.
func (t *UpstreamTLS) Key() string {
	return t.CAFile + "\x00" + t.ServerName + "\x00" + t.CertFile + "\x00" + t.KeyFile
}

// ClientConfig returns the TLS configuration a client of the upstream
// uses: RootCAs from CAFile (nil, the system's, when empty), ServerName,
// and the client certificate of CertFile and KeyFile, the files read now;
// TLS 1.2 at least. Its error is a *[FileError] naming the field at fault
// (ca_file, cert_file or key_file).
func (t *UpstreamTLS) ClientConfig() (*tls.Config, error) {
	tc := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pool, err := LoadCertPool(t.CAFile)
		if err != nil {
			var fe *FileError
			if errors.As(err, &fe) {
				err = &FileError{Field: "ca_file", Err: fe.Err}
			}
			return nil, err
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		pair, err := LoadKeyPair(Certificate{CertFile: t.CertFile, KeyFile: t.KeyFile})
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
