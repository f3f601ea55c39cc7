package httpengine_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/gatewaytest"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// testService is the gRPC upstream of the tests: UnaryCall answers its
// payload back after the request's "x-sleep" metadata (a duration);
// StreamingOutputCall sends a message of each response's size after its
// interval; FullDuplexCall answers each message with its payload. It
// records the metadata and the time left to the deadline of the last call.
type testService struct {
	testpb.UnimplementedTestServiceServer
	name string
	mu   sync.Mutex
	md   metadata.MD
	left time.Duration // 0: no deadline
}

func (s *testService) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	s.mu.Lock()
	s.md, s.left = md, left
	s.mu.Unlock()
}

func (s *testService) last() (metadata.MD, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.md, s.left
}

func (s *testService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.record(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-upstream-panic"); len(v) > 0 {
		// The test hook panics where the gateway reads this answer.
		if err := grpc.SetHeader(ctx, metadata.Pairs("x-test-panic", v[0])); err != nil {
			return nil, err
		}
	}
	if v := md.Get("x-sleep"); len(v) > 0 {
		d, err := time.ParseDuration(v[0])
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	body := append([]byte(s.name+":"), in.GetPayload().GetBody()...)
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

func (s *testService) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	s.record(st.Context())
	for i, p := range in.GetResponseParameters() {
		time.Sleep(time.Duration(p.GetIntervalUs()) * time.Microsecond)
		body := fmt.Appendf(nil, "%s:%d:%s", s.name, i, strings.Repeat("x", int(p.GetSize())))
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: body}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *testService) FullDuplexCall(st grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	s.record(st.Context())
	for {
		in, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		body := append([]byte(s.name+":"), in.GetPayload().GetBody()...)
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: body}}); err != nil {
			return err
		}
	}
}

// serveGRPC serves svc with grpc-go on a test listener: h2c, or TLS when
// tc is set. The server is stopped at cleanup (or earlier by the test).
func serveGRPC(t *testing.T, svc *testService, tc *tls.Config) (*grpc.Server, string) {
	t.Helper()
	var opts []grpc.ServerOption
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	gs := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(gs, svc)
	addr := testkit.Serve(t, gs.Serve)
	t.Cleanup(gs.Stop) // runs before the listener's cleanup: Serve returns
	return gs, addr
}

// authorities are the :authority values of the routes of a grpcFixture,
// and one no route takes; the gateway's certificate names them all.
var authorities = []string{"h2c.test", "h2.test", "limited.test", "conc.test", "short.test", "spare.test", "stubborn.test", "nowhere.test"}

// grpcFixture is a gateway serving h2c and HTTPS in front of gRPC
// upstreams: one over h2c, one over TLS (h2) that requires a client
// certificate, and one the tests may stop. Each route takes the calls of
// its own :authority.
type grpcFixture struct {
	srv            *gateway.Server
	pool           *x509.CertPool
	h2c, h2, spare *testService
	spareServer    *grpc.Server
	stubborn       *stubborn
}

// stubborn is a gRPC upstream on net/http that ignores deadlines: it
// answers a call's headers and one empty message, then waits until the
// gateway cancels the request, which it reports on cancelled with the
// grpc-timeout it was sent.
type stubborn struct {
	cancelled chan struct{}
	mu        sync.Mutex
	timeout   string
}

func (s *stubborn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.timeout = r.Header.Get("Grpc-Timeout")
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/grpc")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte{0, 0, 0, 0, 0}) // one message, empty
	http.NewResponseController(w).Flush()
	select {
	case <-r.Context().Done():
		s.cancelled <- struct{}{}
	case <-time.After(10 * time.Second):
	}
}

func newGRPCFixture(t *testing.T) *grpcFixture {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "upstream CA")
	ca.WriteCert(t, filepath.Join(dir, "upstream-ca.pem"))
	ca.Issue(t, pkix.Name{CommonName: "sluice"}, "sluice").Write(t, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	upCert := ca.Issue(t, pkix.Name{CommonName: "upstream.test"}, "upstream.test").TLS(t)
	f := &grpcFixture{h2c: &testService{name: "h2c"}, h2: &testService{name: "h2"}, spare: &testService{name: "spare"}}
	_, h2cAddr := serveGRPC(t, f.h2c, nil)
	_, h2Addr := serveGRPC(t, f.h2, &tls.Config{Certificates: []tls.Certificate{upCert}, ClientCAs: ca.Pool(),
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	var spareAddr string
	f.spareServer, spareAddr = serveGRPC(t, f.spare, nil)
	f.stubborn = &stubborn{cancelled: make(chan struct{}, 4)}
	var h2cOnly http.Protocols
	h2cOnly.SetUnencryptedHTTP2(true)
	stubAddr := testkit.Serve(t, (&http.Server{Handler: f.stubborn, Protocols: &h2cOnly, ReadHeaderTimeout: 5 * time.Second}).Serve)

	ports := testkit.FreePorts(t, 2)
	certFile, keyFile := filepath.Join(dir, "gateway.pem"), filepath.Join(dir, "gateway-key.pem")
	ca.Issue(t, pkix.Name{CommonName: "gateway"}, authorities...).Write(t, certFile, keyFile)
	f.pool = ca.Pool()
	yaml := fmt.Sprintf(`
server:
  listen: 127.0.0.1:%d
  tls:
    listen: 127.0.0.1:%d
    certificates: [{cert_file: %q, key_file: %q}]
  http2: {h2c: true}
admin: {listen: 127.0.0.1:0}
store: {type: memory}
policies:
  two: {algorithm: fixed_window, limit: 2, window: 1h}
  one: {algorithm: concurrency, limit: 1}
routes:
  - id: h2c
    match: {path: /grpc.testing.TestService/**, host: h2c.test}
    upstream: h2c://%s
  - id: h2
    match: {path: /grpc.testing.TestService/**, host: h2.test}
    upstream: h2://%s
    upstream_tls: {ca_file: upstream-ca.pem, server_name: upstream.test, cert_file: client.pem, key_file: client-key.pem}
  - id: limited
    match: {path: /**, host: limited.test}
    upstream: h2c://%[5]s
    limits: [{policy: two, key: "header:x-user-id"}]
  - id: one-at-a-time
    match: {path: /**, host: conc.test}
    upstream: h2c://%[5]s
    limits: [{policy: one, key: route}]
  - id: short
    match: {path: /**, host: short.test}
    upstream: h2c://%[5]s
    timeout: 300ms
  - id: spare
    match: {path: /**, host: spare.test}
    upstream: h2c://%[7]s
  - id: stubborn
    match: {path: /**, host: stubborn.test}
    upstream: h2c://%[8]s
    timeout: 300ms
`, ports[0], ports[1], certFile, keyFile, h2cAddr, h2Addr, spareAddr, stubAddr)
	cfg, err := config.Parse(filepath.Join(dir, "sluice.yaml"), []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	f.srv = gatewaytest.Start(t, gatewaytest.New(t, cfg, gateway.Deps{}))
	return f
}

// client returns a TestService client of the gateway over proto ("h2c":
// the cleartext listener; "h2": HTTPS) whose calls carry authority.
func (f *grpcFixture) client(t *testing.T, proto, authority string) testpb.TestServiceClient {
	t.Helper()
	addr, creds := f.srv.Addr().String(), insecure.NewCredentials()
	if proto == "h2" {
		addr = f.srv.TLSAddr().String()
		creds = credentials.NewTLS(&tls.Config{RootCAs: f.pool, MinVersion: tls.VersionTLS12})
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithAuthority(authority))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// ctx returns a context for one call, bounded by d, carrying metadata
// (name, value pairs).
func callCtx(t *testing.T, d time.Duration, md ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, md...)
}

func unary(t *testing.T, c testpb.TestServiceClient, ctx context.Context, body string, opts ...grpc.CallOption) (string, error) {
	t.Helper()
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(body)}}, opts...)
	if err != nil {
		return "", err
	}
	return string(resp.GetPayload().GetBody()), nil
}

// wantCode fails unless err is a gRPC status of code.
func wantCode(t *testing.T, what string, err error, code codes.Code) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("%s: error %v, want code %v", what, err, code)
	}
	return st
}

// TestGRPCCalls: unary, server-streaming and bidirectional calls pass
// through the gateway, over h2c and over HTTPS (HTTP/2), to an h2c
// upstream and to an h2 upstream that verifies the gateway's client
// certificate (upstream_tls); metadata reaches the upstream.
func TestGRPCCalls(t *testing.T) {
	f := newGRPCFixture(t)
	for _, proto := range []string{"h2c", "h2"} {
		for _, up := range []string{"h2c", "h2"} {
			t.Run(proto+"-to-"+up, func(t *testing.T) {
				c := f.client(t, proto, up+".test")
				svc := map[string]*testService{"h2c": f.h2c, "h2": f.h2}[up]
				got, err := unary(t, c, callCtx(t, 5*time.Second, "x-user-id", "ann"), "ping")
				if err != nil || got != up+":ping" {
					t.Fatalf("UnaryCall = %q, %v", got, err)
				}
				if md, _ := svc.last(); strings.Join(md.Get("x-user-id"), ",") != "ann" || len(md.Get("x-forwarded-for")) != 1 {
					t.Errorf("the upstream's metadata: %v", md)
				}

				ss, err := c.StreamingOutputCall(callCtx(t, 5*time.Second), &testpb.StreamingOutputCallRequest{
					ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2, IntervalUs: 20000}, {Size: 3}}})
				if err != nil {
					t.Fatal(err)
				}
				var msgs []string
				for {
					m, err := ss.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("StreamingOutputCall after %q: %v", msgs, err)
					}
					msgs = append(msgs, string(m.GetPayload().GetBody()))
				}
				if want := up + ":0:x " + up + ":1:xx " + up + ":2:xxx"; strings.Join(msgs, " ") != want {
					t.Errorf("streamed %q, want %q", msgs, want)
				}

				bs, err := c.FullDuplexCall(callCtx(t, 5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					body := fmt.Sprint("m", i)
					if err := bs.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte(body)}}); err != nil {
						t.Fatal(err)
					}
					m, err := bs.Recv()
					if err != nil || string(m.GetPayload().GetBody()) != up+":"+body {
						t.Fatalf("FullDuplexCall echo %d: %q, %v", i, m.GetPayload().GetBody(), err)
					}
				}
				if err := bs.CloseSend(); err != nil {
					t.Fatal(err)
				}
				if _, err := bs.Recv(); !errors.Is(err, io.EOF) {
					t.Fatalf("FullDuplexCall end: %v, want io.EOF", err)
				}
			})
		}
	}
}

// TestGRPCRefusals: the gateway's own answers to gRPC calls are gRPC
// statuses: a limit keyed on metadata (header:x-user-id) exhausted is
// RESOURCE_EXHAUSTED with the quota in the trailers, for that key only;
// a call no route takes is UNIMPLEMENTED.
func TestGRPCRefusals(t *testing.T) {
	f := newGRPCFixture(t)
	for _, proto := range []string{"h2c", "h2"} {
		t.Run(proto, func(t *testing.T) {
			c := f.client(t, proto, "limited.test")
			user := "user-" + proto
			for i := range 2 {
				if _, err := unary(t, c, callCtx(t, 5*time.Second, "x-user-id", user), "x"); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			var header, trailer metadata.MD
			_, err := unary(t, c, callCtx(t, 5*time.Second, "x-user-id", user), "x", grpc.Header(&header), grpc.Trailer(&trailer))
			st := wantCode(t, "third call", err, codes.ResourceExhausted)
			if !strings.Contains(st.Message(), "Rate limit exceeded") {
				t.Errorf("message %q", st.Message())
			}
			for _, k := range []string{"x-ratelimit-limit", "x-ratelimit-remaining", "ratelimit", "ratelimit-policy", "retry-after"} {
				if len(trailer.Get(k)) == 0 {
					t.Errorf("trailer %s missing: %v", k, trailer)
				}
			}
			if got := trailer.Get("x-ratelimit-remaining"); len(got) == 0 || got[0] != "0" {
				t.Errorf("x-ratelimit-remaining %q", got)
			}
			// Another key has its own budget.
			if _, err := unary(t, c, callCtx(t, 5*time.Second, "x-user-id", "other-"+proto), "x"); err != nil {
				t.Errorf("another user: %v", err)
			}
			// No metadata: the limit's key is empty, denied (403).
			_, err = unary(t, c, callCtx(t, 5*time.Second), "x")
			wantCode(t, "no x-user-id", err, codes.PermissionDenied)

			_, err = unary(t, f.client(t, proto, "nowhere.test"), callCtx(t, 5*time.Second), "x")
			st = wantCode(t, "no route", err, codes.Unimplemented)
			if st.Message() != "No route matches this request." {
				t.Errorf("message %q", st.Message())
			}
		})
	}
}

// TestGRPCConcurrency: a concurrency limit of 1 is held by an open
// bidirectional stream for its whole life: a second call is refused
// (RESOURCE_EXHAUSTED) until the first ends, then admitted.
func TestGRPCConcurrency(t *testing.T) {
	f := newGRPCFixture(t)
	c := f.client(t, "h2c", "conc.test")
	bs, err := c.FullDuplexCall(callCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Recv(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := unary(t, c, callCtx(t, 5*time.Second), "x")
		wantCode(t, fmt.Sprint("a call while the stream is open, ", i), err, codes.ResourceExhausted)
		time.Sleep(50 * time.Millisecond)
	}
	if err := bs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream end: %v", err)
	}
	// The lease is released once the gateway's handler returns, a moment
	// after the client has read the stream's end.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := unary(t, c, callCtx(t, 5*time.Second), "x")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a call after the stream ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGRPCDeadlines: the call's deadline is the shorter of the client's
// and the route's timeout; the upstream sees it as grpc-timeout, and the
// call ends with DEADLINE_EXCEEDED when it passes, a stream too.
func TestGRPCDeadlines(t *testing.T) {
	f := newGRPCFixture(t)
	for _, proto := range []string{"h2c", "h2"} {
		t.Run(proto, func(t *testing.T) {
			// The client's deadline is the shorter.
			start := time.Now()
			_, err := unary(t, f.client(t, proto, "h2c.test"), callCtx(t, 400*time.Millisecond, "x-sleep", "3s"), "x")
			wantCode(t, "client deadline", err, codes.DeadlineExceeded)
			if _, left := f.h2c.last(); left <= 0 || left > 400*time.Millisecond {
				t.Errorf("the upstream's deadline was %v away, want at most 400ms", left)
			}
			if e := time.Since(start); e > 2*time.Second {
				t.Errorf("the call took %v", e)
			}

			// The route's timeout (300ms) is the shorter.
			start = time.Now()
			_, err = unary(t, f.client(t, proto, "short.test"), callCtx(t, 10*time.Second, "x-sleep", "3s"), "x")
			wantCode(t, "route timeout", err, codes.DeadlineExceeded)
			if _, left := f.h2c.last(); left <= 0 || left > 300*time.Millisecond {
				t.Errorf("the upstream's deadline was %v away, want at most 300ms", left)
			}
			if e := time.Since(start); e > 2*time.Second {
				t.Errorf("the call took %v", e)
			}

			// Without a client deadline the route's timeout is sent.
			if _, err := unary(t, f.client(t, proto, "short.test"), context.Background(), "x"); err != nil {
				t.Fatal(err)
			}
			if _, left := f.h2c.last(); left <= 0 || left > 300*time.Millisecond {
				t.Errorf("the upstream's deadline was %v away, want at most 300ms", left)
			}

			// A stream outliving the route's timeout ends with
			// DEADLINE_EXCEEDED after the messages sent before it.
			params := make([]*testpb.ResponseParameters, 20)
			for i := range params {
				params[i] = &testpb.ResponseParameters{Size: 1, IntervalUs: 50000}
			}
			ss, err := f.client(t, proto, "short.test").StreamingOutputCall(callCtx(t, 10*time.Second),
				&testpb.StreamingOutputCallRequest{ResponseParameters: params})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				_, err = ss.Recv()
				if err != nil {
					break
				}
				n++
			}
			wantCode(t, "stream past the route's timeout", err, codes.DeadlineExceeded)
			if n == 0 || n >= len(params) {
				t.Errorf("%d messages before the deadline", n)
			}
		})
	}
}

// TestGRPCDeadlineEnforced: the gateway itself ends a call whose
// deadline passes, even when the upstream ignores it: the client gets the
// messages sent before it and DEADLINE_EXCEEDED, and the upstream's
// request is cancelled.
func TestGRPCDeadlineEnforced(t *testing.T) {
	f := newGRPCFixture(t)
	for _, proto := range []string{"h2c", "h2"} {
		start := time.Now()
		ss, err := f.client(t, proto, "stubborn.test").StreamingOutputCall(callCtx(t, 10*time.Second),
			&testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ss.Recv(); err != nil {
			t.Fatalf("%s: the first message: %v", proto, err)
		}
		_, err = ss.Recv()
		st := wantCode(t, proto+": past the route's timeout", err, codes.DeadlineExceeded)
		if st.Message() != "The call's deadline passed." {
			t.Errorf("%s: message %q", proto, st.Message())
		}
		if e := time.Since(start); e < 300*time.Millisecond || e > 3*time.Second {
			t.Errorf("%s: the call ended after %v, want about 300ms", proto, e)
		}
		select {
		case <-f.stubborn.cancelled:
		case <-time.After(3 * time.Second):
			t.Errorf("%s: the upstream's request was not cancelled", proto)
		}
		f.stubborn.mu.Lock()
		sent := f.stubborn.timeout
		f.stubborn.mu.Unlock()
		if d, err := time.ParseDuration(strings.TrimSuffix(sent, "u") + "us"); err != nil || d > 300*time.Millisecond || d < 200*time.Millisecond {
			t.Errorf("%s: grpc-timeout sent upstream %q, want about 300ms in microseconds", proto, sent)
		}
	}
}

// TestGRPCUpstreamKilled: an upstream that goes away ends an open stream
// with UNAVAILABLE, and the calls after it are UNAVAILABLE.
func TestGRPCUpstreamKilled(t *testing.T) {
	f := newGRPCFixture(t)
	c := f.client(t, "h2c", "spare.test")
	if _, err := unary(t, c, callCtx(t, 5*time.Second), "x"); err != nil {
		t.Fatal(err)
	}
	bs, err := c.FullDuplexCall(callCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Recv(); err != nil {
		t.Fatal(err)
	}
	f.spareServer.Stop()
	_, err = bs.Recv()
	wantCode(t, "the open stream", err, codes.Unavailable)
	_, err = unary(t, c, callCtx(t, 5*time.Second), "x")
	wantCode(t, "a call after", err, codes.Unavailable)
}

// TestGRPCWire: what the gateway's own gRPC answer looks like on the
// wire (HTTP 200, application/grpc, grpc-status and a percent-encoded
// grpc-message in the one header block, no body); a malformed grpc-timeout
// is INTERNAL; a call arriving on the cleartext HTTP/1.1 listener (fasthttp)
// for an HTTP/2-only upstream is answered 505, in problem+json.
func TestGRPCWire(t *testing.T) {
	f := newGRPCFixture(t)
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &h2c}
	t.Cleanup(tr.CloseIdleConnections)
	base := "http://" + f.srv.Addr().String()
	call := func(c *http.Client, host string, header ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("POST", base+"/grpc.testing.TestService/UnaryCall", strings.NewReader("\x00\x00\x00\x00\x00"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	h2 := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, body := call(h2, "nowhere.test")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/grpc" ||
		resp.Header.Get("Grpc-Status") != "12" || resp.Header.Get("Grpc-Message") != "No route matches this request." || body != "" || len(resp.Trailer) != 0 {
		t.Errorf("no route: %d %v %q, trailer %v", resp.StatusCode, resp.Header, body, resp.Trailer)
	}
	resp, _ = call(h2, "h2c.test", "Grpc-Timeout", "soon")
	if resp.Header.Get("Grpc-Status") != "13" || !strings.Contains(resp.Header.Get("Grpc-Message"), "grpc-timeout is malformed") {
		t.Errorf("malformed grpc-timeout: %d %v", resp.StatusCode, resp.Header)
	}

	h1 := &http.Client{Timeout: 10 * time.Second}
	resp, body = call(h1, "h2c.test")
	if resp.StatusCode != http.StatusHTTPVersionNotSupported || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(body, "HTTP/2") {
		t.Errorf("HTTP/1.1 to an h2c upstream: %d %v %s", resp.StatusCode, resp.Header, body)
	}
}

// TestGRPCPanics: a panic of the gateway while a call is decided,
// forwarded or its answer read is answered INTERNAL, a gRPC status, and
// the next call is served.
func TestGRPCPanics(t *testing.T) {
	f := newGRPCFixture(t)
	for _, proto := range []string{"h2c", "h2"} {
		c := f.client(t, proto, "h2c.test")
		// The decide point is past a route's limits: limited.test has some.
		limited := f.client(t, proto, "limited.test")
		for _, md := range [][]string{{"x-test-panic", "decide"}, {"x-test-panic", "forward"}, {"x-upstream-panic", "body"}} {
			cc := c
			if md[1] == "decide" {
				cc, md = limited, append(md, "x-user-id", "panic-"+proto)
			}
			_, err := unary(t, cc, callCtx(t, 5*time.Second, md...), "x")
			st := wantCode(t, proto+" "+md[1], err, codes.Internal)
			if st.Message() != "The gateway failed to answer this request." {
				t.Errorf("%s %s: message %q", proto, md[1], st.Message())
			}
		}
		if _, err := unary(t, c, callCtx(t, 5*time.Second), "x"); err != nil {
			t.Errorf("%s: after the panics: %v", proto, err)
		}
	}
}
