package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/metrics"
)

// tripFunc is an http.RoundTripper made of a function.
type tripFunc func(*http.Request) (*http.Response, error)

func (f tripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestUpstreamFailuresCarryStatus: each way a round trip fails comes back
// as a *proxyError carrying the status the proxy answers with.
func TestUpstreamFailuresCarryStatus(t *testing.T) {
	m, err := metrics.New(metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	blocked := tripFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	for _, tt := range []struct {
		name    string
		next    http.RoundTripper
		timeout time.Duration
		status  int
	}{
		{"refused", tripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") }), 0, 502},
		{"transport timeout", tripFunc(func(*http.Request) (*http.Response, error) { return nil, timeoutErr{} }), 0, 504},
		{"route timeout", blocked, time.Second, 504},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := &upstreamTrip{next: tt.next, route: "r", timeout: tt.timeout, metrics: m}
				resp, err := u.RoundTrip(httptest.NewRequest("GET", "http://up/", nil))
				if resp != nil {
					t.Errorf("RoundTrip returned a response with error %v", err)
				}
				pe, ok := errors.AsType[*proxyError](err)
				if !ok || pe.Status != tt.status {
					t.Errorf("RoundTrip error = %#v, want a *proxyError with status %d", err, tt.status)
				}
			})
		})
	}
}

// TestBodyReadErrorIs400: a request body that fails to read returns a
// *proxyError with status 400, however the transport then reports it.
func TestBodyReadErrorIs400(t *testing.T) {
	broken := io.NopCloser(io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(errors.New("malformed chunk"))))
	b := newBodyReader(broken, httptest.NewRecorder())
	_, err := io.ReadAll(b)
	if pe, ok := errors.AsType[*proxyError](err); !ok || pe.Status != http.StatusBadRequest {
		t.Fatalf("reading a broken body: error %#v, want a *proxyError with status 400", err)
	}
	u := &upstreamTrip{}
	req := httptest.NewRequest("POST", "http://up/", nil).WithContext(context.Background())
	if err := u.failed(req, errors.New("connection closed"), nil, b); err != b.failure() {
		t.Errorf("failed(...) with a broken body = %v, want the body's error", err)
	}
}
