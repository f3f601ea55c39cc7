package tlsconf

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// serve serves TLS with cfg on a loopback listener of the test kit. Each
// connection, once its handshake is done, gets one line naming its client
// certificate's subject ("-" for none), then has every line it sends
// echoed. It returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	return testkit.ServeConns(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		if err := tc.Handshake(); err != nil {
			return
		}
		peer := "-"
		if cs := tc.ConnectionState(); len(cs.VerifiedChains) > 0 {
			peer = cs.VerifiedChains[0][0].Subject.String()
		}
		if _, err := io.WriteString(tc, peer+"\n"); err != nil {
			return
		}
		r := bufio.NewReader(tc)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := io.WriteString(tc, line); err != nil {
				return
			}
		}
	})
}

// conn is a client's open TLS connection to serve's server.
type conn struct {
	*tls.Conn
	r    *bufio.Reader
	peer string // what the server said of the client certificate
}

// clientConfig asks for name, trusts pool and presents cert, if given,
// whatever CAs the server names as acceptable (Go's client would otherwise
// send no certificate the server's CAs did not issue; a hostile client
// sends it anyway).
func clientConfig(name string, pool *x509.CertPool, cert *tls.Certificate) *tls.Config {
	c := &tls.Config{ServerName: name, RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}}
	if cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return c
}

// dial connects to addr asking for name, trusting pool, presenting cert
// (clientConfig). It fails when the handshake fails or the server closes
// the connection without its first line (a client certificate refused
// after a TLS 1.3 handshake).
func dial(addr, name string, pool *x509.CertPool, cert ...tls.Certificate) (*conn, error) {
	var cc *tls.Certificate
	if len(cert) > 0 {
		cc = &cert[0]
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, clientConfig(name, pool, cc))
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	peer, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	return &conn{Conn: c, r: r, peer: strings.TrimSuffix(peer, "\n")}, nil
}

// served returns the common name of the certificate the server presented.
func (c *conn) served() string { return c.ConnectionState().PeerCertificates[0].Subject.CommonName }

// echo checks that the connection still carries data both ways.
func (c *conn) echo(t *testing.T, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatalf("write on the open connection: %v", err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil || got != msg+"\n" {
		t.Fatalf("echo on the open connection = %q, %v; want %q", got, err, msg)
	}
}

// servedName dials addr for name and returns the served certificate's
// common name.
func servedName(t *testing.T, addr, name string, pool *x509.CertPool) string {
	t.Helper()
	c, err := dial(addr, name, pool)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	defer c.Close()
	return c.served()
}

// files writes leaf to dir as NAME.pem and NAME-key.pem and returns the
// config.Certificate naming them.
func files(t *testing.T, dir, name string, leaf *testcert.Leaf) config.Certificate {
	t.Helper()
	c := config.Certificate{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	leaf.Write(t, c.CertFile, c.KeyFile)
	return c
}

// logBuffer is a slog handler's output, safe to read while it is written.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSNI: the certificate served is the one for the name the client
// asks for, the first when none has it; ALPN offers h2.
func TestSNI(t *testing.T) {
	ca := testcert.NewCA(t, "sni CA")
	dir := t.TempDir()
	c := &config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{
		files(t, dir, "a", ca.Issue(t, pkix.Name{CommonName: "a"}, "a.example", "127.0.0.1")),
		files(t, dir, "b", ca.Issue(t, pkix.Name{CommonName: "b"}, "b.example", "*.b.example")),
	}}
	s, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.TLSConfig())
	for name, want := range map[string]string{"a.example": "a", "b.example": "b", "x.b.example": "b", "127.0.0.1": "a"} {
		if got := servedName(t, addr, name, ca.Pool()); got != want {
			t.Errorf("asking for %s: served %s, want %s", name, got, want)
		}
	}
	// A name no certificate has: the first is served, which the client
	// then refuses.
	cl, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "c.example", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "a" {
		t.Errorf("asking for c.example: served %s, want the first, a", got)
	}
	if _, err := dial(addr, "c.example", ca.Pool()); err == nil {
		t.Error("a client verifying c.example accepted a certificate without it")
	}
	ac, err := dial(addr, "a.example", ca.Pool())
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if p := ac.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("ALPN chose %q, want h2", p)
	}
	if leaves := s.Certificates(); len(leaves) != 2 || leaves[0].Subject.CommonName != "a" || leaves[1].Subject.CommonName != "b" {
		t.Errorf("Certificates() = %v", leaves)
	}
}

// TestMinVersion: min_version 1.3 refuses a TLS 1.2 client; 1.2 takes it.
func TestMinVersion(t *testing.T) {
	ca := testcert.NewCA(t, "version CA")
	cert := files(t, t.TempDir(), "a", ca.Issue(t, pkix.Name{CommonName: "a"}, "a.example"))
	for _, tt := range []struct {
		min  string
		ok12 bool
	}{{"1.2", true}, {"1.3", false}} {
		s, err := New(&config.TLS{Listen: ":0", MinVersion: tt.min, Certificates: []config.Certificate{cert}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		addr := serve(t, s.TLSConfig())
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.example", RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12})
		if err == nil {
			c.Close()
		}
		if (err == nil) != tt.ok12 {
			t.Errorf("min_version %s: TLS 1.2 client's handshake error %v, want success %v", tt.min, err, tt.ok12)
		}
	}
}

// TestClientCertificates: with client_ca, require refuses a client
// without a certificate; optional takes it; both refuse a certificate
// from another CA and verify one from the CA; without client_ca no
// certificate is asked for.
func TestClientCertificates(t *testing.T) {
	serverCA, clientCA, otherCA := testcert.NewCA(t, "server CA"), testcert.NewCA(t, "client CA"), testcert.NewCA(t, "other CA")
	dir := t.TempDir()
	cert := files(t, dir, "server", serverCA.Issue(t, pkix.Name{CommonName: "server"}, "api.example"))
	caFile := filepath.Join(dir, "client-ca.pem")
	clientCA.WriteCert(t, caFile)
	alice := clientCA.Issue(t, pkix.Name{CommonName: "alice", Organization: []string{"Acme"}}).TLS(t)
	mallory := otherCA.Issue(t, pkix.Name{CommonName: "mallory"}).TLS(t)

	for _, tt := range []struct {
		name             string
		clientCA         string
		auth             config.ClientAuth
		none, good, evil string // the server's line, or "refused"
	}{
		{"require", caFile, config.ClientAuthRequire, "refused", "CN=alice,O=Acme", "refused"},
		{"optional", caFile, config.ClientAuthOptional, "-", "CN=alice,O=Acme", "refused"},
		{"no client_ca", "", "", "-", "-", "-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(&config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{cert}, ClientCA: tt.clientCA, ClientAuth: tt.auth}, nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, s.TLSConfig())
			for _, c := range []struct {
				what string
				cert *tls.Certificate
				want string
			}{{"no certificate", nil, tt.none}, {"the CA's", &alice, tt.good}, {"another CA's", &mallory, tt.evil}} {
				for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
					got := "refused"
					cfg := clientConfig("api.example", serverCA.Pool(), c.cert)
					cfg.MaxVersion = v
					cl, err := tls.Dial("tcp", addr, cfg)
					if err == nil {
						cl.SetDeadline(time.Now().Add(5 * time.Second))
						if line, err := bufio.NewReader(cl).ReadString('\n'); err == nil {
							got = strings.TrimSuffix(line, "\n")
						}
						cl.Close()
					}
					if got != c.want {
						t.Errorf("%s, TLS %x: server saw %q, want %q", c.what, v, got, c.want)
					}
				}
			}
		})
	}
}

// TestReload: Reload puts new files in force for the next handshake and
// leaves an open connection working; a Reload whose files do not load
// returns the error and keeps the certificates in force.
func TestReload(t *testing.T) {
	ca := testcert.NewCA(t, "reload CA")
	dir := t.TempDir()
	one := files(t, dir, "one", ca.Issue(t, pkix.Name{CommonName: "one"}, "api.example"))
	two := files(t, dir, "two", ca.Issue(t, pkix.Name{CommonName: "two"}, "api.example"))
	s, err := New(&config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{one}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.TLSConfig())
	open, err := dial(addr, "api.example", ca.Pool())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	bad := config.Certificate{CertFile: two.CertFile, KeyFile: one.KeyFile}
	err = s.Reload(&config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{bad}})
	if err == nil || !strings.Contains(err.Error(), "server.tls.certificates[0].key_file: the private key in") {
		t.Errorf("Reload of a mismatched pair: %v", err)
	}
	if got := servedName(t, addr, "api.example", ca.Pool()); got != "one" {
		t.Errorf("after a failed reload, served %s, want one", got)
	}
	if err := s.Reload(&config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{two}}); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, addr, "api.example", ca.Pool()); got != "two" {
		t.Errorf("after a reload, served %s, want two", got)
	}
	open.echo(t, "still here")
	if got := open.served(); got != "one" {
		t.Errorf("the open connection's certificate is %s, want one", got)
	}
	if _, err := New(&config.TLS{Listen: ":0", Certificates: []config.Certificate{bad}}, nil); err == nil {
		t.Error("New with a mismatched pair succeeded")
	}
}

// watched starts a store on c whose watchers react quickly, watching until
// the test ends, and returns it with its log.
func watched(t *testing.T, c *config.TLS) (*Store, *logBuffer) {
	t.Helper()
	log := &logBuffer{}
	s, err := New(c, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.debounce, s.settle = 30*time.Millisecond, 60*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Watch(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Watch has started watching once it holds watchers.
	eventually(t, "Watch watches", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.watchers) > 0
	})
	return s, log
}

// TestWatchRewrite: files rewritten on disk (each replaced by a rename)
// are served to the next handshake while an open connection stays up and
// working; a broken rewrite is logged and keeps the certificate in force.
func TestWatchRewrite(t *testing.T) {
	ca := testcert.NewCA(t, "watch CA")
	dir := t.TempDir()
	cert := files(t, dir, "server", ca.Issue(t, pkix.Name{CommonName: "first"}, "api.example"))
	s, log := watched(t, &config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{cert}})
	addr := serve(t, s.TLSConfig())
	open, err := dial(addr, "api.example", ca.Pool())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	ca.Issue(t, pkix.Name{CommonName: "second"}, "api.example").Write(t, cert.CertFile, cert.KeyFile)
	eventually(t, "the rewritten certificate is served", func() bool { return servedName(t, addr, "api.example", ca.Pool()) == "second" })
	open.echo(t, "after the rewrite")
	if got := open.served(); got != "first" {
		t.Errorf("the open connection's certificate is %s, want first", got)
	}

	// A broken rewrite: a key of another certificate.
	other := ca.Issue(t, pkix.Name{CommonName: "third"}, "api.example")
	testcert.WriteFile(t, cert.KeyFile, other.KeyPEM)
	eventually(t, "the failed reload is logged", func() bool {
		return strings.Contains(log.String(), "do not load; keeping the certificates in force")
	})
	if got := servedName(t, addr, "api.example", ca.Pool()); got != "second" {
		t.Errorf("after a broken rewrite, served %s, want second", got)
	}
	if !strings.Contains(log.String(), "does not match the certificate") {
		t.Errorf("the log does not say why:\n%s", log)
	}
	// Mending it puts the new pair in force.
	testcert.WriteFile(t, cert.CertFile, other.CertPEM)
	eventually(t, "the mended pair is served", func() bool { return servedName(t, addr, "api.example", ca.Pool()) == "third" })
	open.echo(t, "still up")
}

// TestWatchSymlinkSwap: a Kubernetes Secret volume's update, which
// replaces the "..data" symlink to a new timestamped directory in one
// rename, is seen; so is a new client CA.
func TestWatchSymlinkSwap(t *testing.T) {
	ca := testcert.NewCA(t, "swap CA")
	vol := t.TempDir()
	version := 0
	// publish writes a new timestamped directory with the leaf and the
	// client CA, and points ..data at it, as the kubelet does.
	publish := func(leaf *testcert.Leaf, clientCA *testcert.CA) {
		version++
		ts := fmt.Sprintf("..2026_11_28_%02d", version)
		if err := os.Mkdir(filepath.Join(vol, ts), 0o700); err != nil {
			t.Fatal(err)
		}
		leaf.Write(t, filepath.Join(vol, ts, "tls.crt"), filepath.Join(vol, ts, "tls.key"))
		clientCA.WriteCert(t, filepath.Join(vol, ts, "ca.crt"))
		tmp := filepath.Join(vol, "..data_tmp")
		if err := os.Symlink(ts, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
		if version > 1 {
			os.RemoveAll(filepath.Join(vol, fmt.Sprintf("..2026_11_28_%02d", version-1)))
		}
	}
	clientsOne, clientsTwo := testcert.NewCA(t, "clients one"), testcert.NewCA(t, "clients two")
	publish(ca.Issue(t, pkix.Name{CommonName: "v1"}, "api.example"), clientsOne)
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(vol, f)); err != nil {
			t.Fatal(err)
		}
	}
	c := &config.TLS{Listen: ":0", MinVersion: "1.2", ClientCA: filepath.Join(vol, "ca.crt"), ClientAuth: config.ClientAuthOptional,
		Certificates: []config.Certificate{{CertFile: filepath.Join(vol, "tls.crt"), KeyFile: filepath.Join(vol, "tls.key")}}}
	s, _ := watched(t, c)
	addr := serve(t, s.TLSConfig())
	one := clientsOne.Issue(t, pkix.Name{CommonName: "one"}).TLS(t)
	two := clientsTwo.Issue(t, pkix.Name{CommonName: "two"}).TLS(t)
	open, err := dial(addr, "api.example", ca.Pool(), one)
	if err != nil || open.served() != "v1" || open.peer != "CN=one" {
		t.Fatalf("before the swap: %v", err)
	}
	defer open.Close()

	publish(ca.Issue(t, pkix.Name{CommonName: "v2"}, "api.example"), clientsTwo)
	eventually(t, "the swapped certificate is served", func() bool { return servedName(t, addr, "api.example", ca.Pool()) == "v2" })
	if c, err := dial(addr, "api.example", ca.Pool(), two); err != nil || c.peer != "CN=two" {
		t.Errorf("a client of the new CA after the swap: %v", err)
	} else {
		c.Close()
	}
	if c, err := dial(addr, "api.example", ca.Pool(), one); err == nil {
		c.Close()
		t.Error("a client of the old CA was taken after the swap")
	}
	open.echo(t, "across the swap")
}

// TestResumedSessionReverified: a client resuming a TLS session after a
// reload replaced the client CA that issued its certificate is refused,
// as a new handshake with that certificate would be (crypto/tls checks the
// session's chains against the ClientCAs the handshake's configuration
// gives, the ones in force); before the reload it resumes.
func TestResumedSessionReverified(t *testing.T) {
	serverCA, clientsOne, clientsTwo := testcert.NewCA(t, "server CA"), testcert.NewCA(t, "clients one"), testcert.NewCA(t, "clients two")
	dir := t.TempDir()
	cert := files(t, dir, "server", serverCA.Issue(t, pkix.Name{CommonName: "server"}, "api.example"))
	oneFile, twoFile := filepath.Join(dir, "one.pem"), filepath.Join(dir, "two.pem")
	clientsOne.WriteCert(t, oneFile)
	clientsTwo.WriteCert(t, twoFile)
	conf := func(ca string) *config.TLS {
		return &config.TLS{Listen: ":0", MinVersion: "1.2", Certificates: []config.Certificate{cert}, ClientCA: ca, ClientAuth: config.ClientAuthRequire}
	}
	s, err := New(conf(oneFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.TLSConfig())
	alice := clientsOne.Issue(t, pkix.Name{CommonName: "alice"}).TLS(t)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		if err := s.Reload(conf(oneFile)); err != nil {
			t.Fatal(err)
		}
		cfg := clientConfig("api.example", serverCA.Pool(), &alice)
		cfg.MaxVersion = v
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		// connect returns the server's line and whether the session was
		// resumed; the line read brings TLS 1.3's ticket in.
		connect := func() (string, bool, error) {
			c, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				return "", false, err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			return strings.TrimSuffix(line, "\n"), c.ConnectionState().DidResume, err
		}
		if peer, _, err := connect(); err != nil || peer != "CN=alice" {
			t.Fatalf("TLS %x: first connection: %q, %v", v, peer, err)
		}
		if peer, resumed, err := connect(); err != nil || peer != "CN=alice" || !resumed {
			t.Fatalf("TLS %x: second connection: %q, resumed %v, %v; want a resumed session", v, peer, resumed, err)
		}
		if err := s.Reload(conf(twoFile)); err != nil {
			t.Fatal(err)
		}
		if peer, resumed, err := connect(); err == nil {
			t.Errorf("TLS %x: after the client CA changed, a session resumed (%v) with alice's certificate: server saw %q", v, resumed, peer)
		}
	}
}
