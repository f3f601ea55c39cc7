package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// Example wraps a handler with a per-user limit of 3 requests per minute
// (windows aligned to the minute; the clock starts 20 s into one),
// on the memory store and a manual clock.
func Example() {
	clock := kit.NewManualClock(time.Unix(1_764_099_980, 0))
	store, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	perUser := ratelimit.MustPolicy(ratelimit.PolicyConfig{
		Name: "per-user", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Minute,
	})
	key, err := httplimit.ParseKeys([]string{"header:X-User-Id"})
	if err != nil {
		panic(err)
	}
	m, err := httplimit.New(httplimit.Options{
		Route:  "api",
		Store:  store,
		Clock:  clock,
		Limits: []httplimit.Limit{{Policy: perUser, Key: key}},
	})
	if err != nil {
		panic(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello", r.Header.Get("X-User-Id"))
	}))

	send := func(user string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/api/hello", nil)
		if user != "" {
			r.Header.Set("X-User-Id", user)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for range 3 {
		w := send("alice")
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	w := send("alice")
	fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"))
	fmt.Println(w.Body.String())
	fmt.Println(send("bob").Code)
	fmt.Println(send("").Code) // no key: denied by default

	clock.Advance(40 * time.Second) // the next window
	fmt.Println(send("alice").Code)
	// Output:
	// 200 "per-user";r=2;t=0
	// 200 "per-user";r=1;t=0
	// 200 "per-user";r=0;t=40
	// 429 Retry-After: 40
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded. Please retry after 40 seconds.","violated-policies":["per-user"],"error":"Too Many Requests","message":"Rate limit exceeded. Please retry after 40 seconds.","retry_after":40}
	// 200
	// 403
	// 200
}
