package config

// TLS configures the public listener's TLS termination (server.tls). When
// it is set, sluice serves HTTPS on Listen (HTTP/1.1 and HTTP/2, chosen by
// ALPN) beside the cleartext listener of server.listen, whose requests
// Plaintext decides.
type TLS struct {
	// Listen is the HTTPS listener's address, host:port. Required.
	Listen string `yaml:"listen"`
	// Certificates are the server's certificates; the one offered to a
	// client is chosen by the name it asks for (SNI), the first when none
	// matches. At least one is required. sluice reads the files again when
	// they change on disk and on every reload; a handshake uses the
	// certificates in force when it starts.
	Certificates []Certificate `yaml:"certificates"`
	// ClientCA, when set, is a PEM file of the certificate authorities
	// client certificates are verified against: mutual TLS. The verified
	// certificate is what the client_cert:subject and client_cert:cn key
	// parts read.
	ClientCA string `yaml:"client_ca"`
	// ClientAuth says whether a client must present a certificate when
	// ClientCA is set: "require" (the default) or "optional" (verified when
	// given).
	ClientAuth ClientAuth `yaml:"client_auth"`
	// MinVersion is the oldest TLS version accepted: "1.2" (the default)
	// or "1.3".
	MinVersion string `yaml:"min_version"`
	// Plaintext is what the cleartext listener does with a request when TLS
	// is on: serve it (the default), redirect it (308 to the https URL) or
	// refuse it (403). Forward-auth routes are served in every mode, and
	// the admin listener is never affected.
	Plaintext Plaintext `yaml:"plaintext"`
}

// Certificate is one certificate chain and its private key, PEM files. A
// relative path, here and in ClientCA, is relative to the configuration
// file's directory, as rls.envoy_config's are: [Parse] resolves it, so a
// Config from [Load] or [Parse] holds paths that open from the process's
// working directory, and its effective configuration shows them so.
type Certificate struct {
	// CertFile is the certificate chain, leaf first. Required.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the leaf's private key (PKCS #1, PKCS #8 or SEC 1).
	// Required.
	KeyFile string `yaml:"key_file"`
}

// ClientAuth is server.tls.client_auth.
type ClientAuth string

// The values of server.tls.client_auth.
const (
	ClientAuthRequire  ClientAuth = "require"
	ClientAuthOptional ClientAuth = "optional"
)

// Plaintext is server.tls.plaintext.
type Plaintext string

// The values of server.tls.plaintext.
const (
	PlaintextServe    Plaintext = "serve"
	PlaintextRedirect Plaintext = "redirect"
	PlaintextRefuse   Plaintext = "refuse"
)

// HTTP2 configures HTTP/2 on the public listeners (server.http2): over
// TLS, chosen by ALPN, and in cleartext by prior knowledge when H2C is on.
type HTTP2 struct {
	// H2C serves HTTP/2 by prior knowledge (h2c) on the cleartext listener,
	// beside HTTP/1.1. Default false.
	H2C bool `yaml:"h2c"`
	// MaxConcurrentStreams bounds the streams a client may have open at
	// once on one connection. Default 100.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
}

// DefaultMaxConcurrentStreams is server.http2.max_concurrent_streams's
// default.
const DefaultMaxConcurrentStreams = 100

// Other defaults and bounds of server.tls and server.http2.
const (
	// DefaultTLSMinVersion is server.tls.min_version's default.
	DefaultTLSMinVersion = "1.2"
	// MaxHTTP2Streams bounds server.http2.max_concurrent_streams.
	MaxHTTP2Streams = 1 << 16
)
