package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark
// measures the middleware rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkMiddleware measures the middleware's overhead per request on the
// memory store with the system clock: key resolution, one store call, the
// headers. Users rotate over 1024 keys, and the policy admits everything.
func BenchmarkMiddleware(b *testing.B) {
	big := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 1 << 40, Rate: 1e6})
	window := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "hourly", Algorithm: ratelimit.FixedWindow, Limit: 1 << 40, Window: time.Hour})
	cases := []struct {
		name   string
		limits []Limit
	}{
		{"none", nil},
		{"header", []Limit{{Policy: big, Key: mustKey(b, "header:X-User-Id")}}},
		{"ip", []Limit{{Policy: big, Key: mustKey(b, "ip")}}},
		{"header+const", []Limit{
			{Policy: big, Key: mustKey(b, "header:X-User-Id")},
			{Policy: window, Key: mustKey(b, "const:global")},
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			store, err := memory.New(memory.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { store.Close() })
			m, err := New(Options{Route: "api", Store: store, Limits: c.limits})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			reqs := make([]*http.Request, 1024)
			for i := range reqs {
				r := httptest.NewRequest(http.MethodGet, "/api/items", nil)
				r.RemoteAddr = "192.0.2." + strconv.Itoa(i%250) + ":1234"
				r.Header.Set("X-User-Id", "user-"+strconv.Itoa(i))
				reqs[i] = r
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: make(http.Header)}
				i := 0
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, reqs[i%len(reqs)])
					i++
				}
			})
		})
	}
}
