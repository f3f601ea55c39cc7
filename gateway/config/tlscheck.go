package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// Version returns MinVersion as a crypto/tls version: tls.VersionTLS13 for
// "1.3", tls.VersionTLS12 otherwise (the default, "1.2").
func (t *TLS) Version() uint16 {
	if t.MinVersion == "1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// FileError is a problem with a file that server.tls names. Field is the
// key that names it ("cert_file", "key_file" or "client_ca"); Err says what
// is wrong, in words that quote the file's path.
type FileError struct {
	Field string
	Err   error
}

func (e *FileError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// fileError returns a *FileError for field with a message.
func fileError(field, format string, args ...any) *FileError {
	return &FileError{Field: field, Err: fmt.Errorf(format, args...)}
}

// readFile reads a file server.tls names, or says in plain words why it
// cannot: it does not exist, access is denied, it is a directory.
func readFile(field, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return data, nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fileError(field, "cannot read %q: no such file", path)
	case errors.Is(err, fs.ErrPermission):
		return nil, fileError(field, "cannot read %q: permission denied", path)
	}
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		return nil, fileError(field, "cannot read %q: it is a directory, not a PEM file", path)
	}
	return nil, fileError(field, "cannot read %q: %v", path, err)
}

// pemTypes returns the types of the PEM blocks in data, in order.
func pemTypes(data []byte) []string {
	var types []string
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return types
		}
		types = append(types, b.Type)
	}
}

// hasType reports whether one of types is want, or ends in want when
// suffix is set.
func hasType(types []string, want string, suffix bool) bool {
	for _, t := range types {
		if t == want || suffix && strings.HasSuffix(t, want) {
			return true
		}
	}
	return false
}

// LoadKeyPair reads c's certificate chain and private key, as
// crypto/tls.LoadX509KeyPair does, and checks that the key is the leaf
// certificate's. Its error is a *[FileError] naming the file at fault and
// the cause in plain words (when neither file can be read, the two joined
// by errors.Join): a file that cannot be read, that holds no PEM
// certificate (or no PEM private key), a certificate that does not parse,
// a key that does not match the certificate.
func LoadKeyPair(c Certificate) (tls.Certificate, error) {
	certPEM, certErr := readFile("cert_file", c.CertFile)
	keyPEM, keyErr := readFile("key_file", c.KeyFile)
	if certErr != nil || keyErr != nil {
		return tls.Certificate{}, errors.Join(certErr, keyErr)
	}
	switch types := pemTypes(certPEM); {
	case hasType(types, "CERTIFICATE", false):
	case hasType(types, "PRIVATE KEY", true):
		return tls.Certificate{}, fileError("cert_file", "%q holds a private key, not a PEM certificate: are cert_file and key_file swapped?", c.CertFile)
	default:
		return tls.Certificate{}, fileError("cert_file", "%q holds no PEM certificate (a block starting -----BEGIN CERTIFICATE-----)", c.CertFile)
	}
	for i, rest := 0, certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		i++
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return tls.Certificate{}, fileError("cert_file", "certificate %d in %q does not parse: %v", i, c.CertFile, err)
		}
	}
	switch types := pemTypes(keyPEM); {
	case hasType(types, "PRIVATE KEY", true):
	case hasType(types, "CERTIFICATE", false):
		return tls.Certificate{}, fileError("key_file", "%q holds a certificate, not a PEM private key: are cert_file and key_file swapped?", c.KeyFile)
	default:
		return tls.Certificate{}, fileError("key_file", "%q holds no PEM private key (a block starting -----BEGIN ... PRIVATE KEY-----)", c.KeyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil {
		return pair, nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "does not match"):
		return tls.Certificate{}, fileError("key_file", "the private key in %q does not match the certificate in %q", c.KeyFile, c.CertFile)
	case strings.Contains(msg, "failed to parse private key"):
		return tls.Certificate{}, fileError("key_file", "the private key in %q does not parse (PKCS #1, PKCS #8 or SEC 1 expected)", c.KeyFile)
	case strings.Contains(msg, "public key algorithm"):
		return tls.Certificate{}, fileError("cert_file", "the certificate in %q has a public key of a kind TLS cannot use", c.CertFile)
	}
	return tls.Certificate{}, fileError("key_file", "%q and %q do not make a key pair: %s", c.KeyFile, c.CertFile, strings.TrimPrefix(msg, "tls: "))
}

// LoadCertPool reads a PEM file of certificate authorities (client_ca)
// into a pool. Its error is a *[FileError] for field "client_ca": a file
// that cannot be read, or that holds no PEM certificate that parses.
func LoadCertPool(file string) (*x509.CertPool, error) {
	data, err := readFile("client_ca", file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fileError("client_ca", "%q holds no PEM certificate that parses (a block starting -----BEGIN CERTIFICATE-----)", file)
	}
	return pool, nil
}

// resolvePaths makes t's relative file paths relative to dir, the
// configuration file's directory.
func (t *TLS) resolvePaths(dir string) {
	res := func(p *string) {
		if *p != "" {
			*p = resolve(dir, *p)
		}
	}
	for i := range t.Certificates {
		res(&t.Certificates[i].CertFile)
		res(&t.Certificates[i].KeyFile)
	}
	res(&t.ClientCA)
}

// applyTLSDefaults fills server.tls's and server.http2's unset fields.
func applyTLSDefaults(s *Server) {
	setDefault(&s.HTTP2.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	t := s.TLS
	if t == nil {
		return
	}
	if t.ClientCA != "" {
		setDefault(&t.ClientAuth, ClientAuthRequire)
	}
	setDefault(&t.MinVersion, DefaultTLSMinVersion)
	setDefault(&t.Plaintext, PlaintextServe)
}

// tlsZeros reports the fields of server.tls and server.http2 the file sets
// to a zero value that is neither allowed nor a way to ask for the
// default (see explicitZeros).
func (v *validator) tlsZeros(s *Server, zero func(path string, isZero bool, msg string)) {
	if t := s.TLS; t != nil {
		zero("server.tls.client_auth", t.ClientAuth == "", "is empty (allowed: require, optional)")
		zero("server.tls.min_version", t.MinVersion == "", `is empty (allowed: "1.2", "1.3")`)
		zero("server.tls.plaintext", t.Plaintext == "", "is empty (allowed: serve, redirect, refuse)")
	}
	h := s.HTTP2
	zero("server.http2.max_concurrent_streams", h.MaxConcurrentStreams == 0,
		"must be at least 1, got 0 (leave it out for "+strconv.Itoa(DefaultMaxConcurrentStreams)+")")
}

// tls checks server.tls: its listener, and every file it names, which it
// reads (LoadKeyPair, LoadCertPool).
func (v *validator) tls(c *Config) {
	t := c.Server.TLS
	if t == nil {
		return
	}
	const p = "server.tls"
	others := []struct{ name, addr string }{{"server.listen", c.Server.Listen}, {"admin.listen", c.Admin.Listen}}
	if c.RLS != nil {
		others = append(others, struct{ name, addr string }{"rls.listen", c.RLS.Listen})
	}
	if t.Listen == "" {
		v.errf(p+".listen", "listen is required: the HTTPS listener's address, host:port (e.g. :8443)")
	} else if err := checkListen(t.Listen); err != nil {
		v.errf(p+".listen", "%v", err)
	} else if !strings.HasSuffix(t.Listen, ":0") {
		for _, o := range others {
			if t.Listen == o.addr {
				v.errf(p+".listen", "%q is also %s; the HTTPS listener needs its own address", t.Listen, o.name)
				break
			}
		}
	}

	if len(t.Certificates) == 0 && !v.bad[p+".certificates"] {
		v.errf(p+".certificates", "at least one certificate is required (- {cert_file: FILE, key_file: FILE})")
	}
	for i, cert := range t.Certificates {
		cp := fmt.Sprintf("%s.certificates[%d]", p, i)
		if cert.CertFile == "" {
			v.errf(cp+".cert_file", "cert_file is required: a PEM file of the certificate chain, leaf first")
		}
		if cert.KeyFile == "" {
			v.errf(cp+".key_file", "key_file is required: a PEM file of the certificate's private key")
		}
		if cert.CertFile == "" || cert.KeyFile == "" {
			continue
		}
		pair, err := LoadKeyPair(cert)
		if err != nil {
			v.fileErr(cp, err)
			continue
		}
		switch now := time.Now(); {
		case now.After(pair.Leaf.NotAfter):
			v.warnf(cp+".cert_file", "the certificate in %q expired at %s: clients refuse it",
				cert.CertFile, pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(pair.Leaf.NotBefore):
			v.warnf(cp+".cert_file", "the certificate in %q is not valid before %s: clients refuse it until then",
				cert.CertFile, pair.Leaf.NotBefore.UTC().Format(time.RFC3339))
		}
	}

	if t.ClientCA != "" {
		if _, err := LoadCertPool(t.ClientCA); err != nil {
			v.fileErr(p, err)
		}
	}
	switch t.ClientAuth {
	case ClientAuthRequire, ClientAuthOptional:
		if t.ClientCA == "" {
			v.errf(p+".client_auth", "client_auth %q needs client_ca, the certificate authorities that client certificates are verified against", t.ClientAuth)
		}
	case "":
	default:
		v.errf(p+".client_auth", "unknown client_auth %q (allowed: require, optional)", t.ClientAuth)
	}
	switch t.MinVersion {
	case "1.2", "1.3":
	default:
		v.errf(p+".min_version", `unknown min_version %q (allowed: "1.2", "1.3")`, t.MinVersion)
	}
	switch t.Plaintext {
	case PlaintextServe, PlaintextRedirect, PlaintextRefuse:
	default:
		v.errf(p+".plaintext", "unknown plaintext %q (allowed: serve, redirect, refuse)", t.Plaintext)
	}
}

// fileErr reports err, a *FileError from LoadKeyPair or LoadCertPool, at
// its field under p.
func (v *validator) fileErr(p string, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			v.fileErr(p, e)
		}
		return
	}
	var fe *FileError
	if errors.As(err, &fe) {
		v.errf(p+"."+fe.Field, "%v", fe.Err)
		return
	}
	v.errf(p, "%v", err)
}

// http2 checks server.http2.
func (v *validator) http2(h *HTTP2) {
	// 0 is left for ApplyDefaults; the file cannot give it (tlsZeros).
	if n := h.MaxConcurrentStreams; n < 0 || n > MaxHTTP2Streams {
		v.errf("server.http2.max_concurrent_streams", "must be from 1 to %d, got %d", MaxHTTP2Streams, n)
	}
}

// tlsEffective writes server.tls and server.http2 for Effective, at the
// server section's indent. client_ca and client_auth, whose zero values
// the file may not give, are written only when client_ca is set.
func (w *yamlWriter) tlsEffective(s *Server) {
	if t := s.TLS; t != nil {
		w.line(1, "tls:")
		w.kv(2, "listen", quote(t.Listen))
		if len(t.Certificates) == 0 {
			w.kv(2, "certificates", "[]")
		} else {
			w.line(2, "certificates:")
			for _, c := range t.Certificates {
				w.kv(3, "- cert_file", quote(c.CertFile))
				w.kv(4, "key_file", quote(c.KeyFile))
			}
		}
		if t.ClientCA != "" {
			w.kv(2, "client_ca", quote(t.ClientCA))
			w.kv(2, "client_auth", quote(string(t.ClientAuth)))
		}
		w.kv(2, "min_version", quote(t.MinVersion))
		w.kv(2, "plaintext", quote(string(t.Plaintext)))
	}
	h := s.HTTP2
	w.line(1, "http2:")
	w.kv(2, "h2c", strconv.FormatBool(h.H2C))
	w.kv(2, "max_concurrent_streams", strconv.Itoa(h.MaxConcurrentStreams))
}

// Files returns the files t names: each certificate's cert_file and
// key_file, in order, then client_ca when it is set.
func (t *TLS) Files() []string {
	var out []string
	for _, c := range t.Certificates {
		out = append(out, c.CertFile, c.KeyFile)
	}
	if t.ClientCA != "" {
		out = append(out, t.ClientCA)
	}
	return out
}
