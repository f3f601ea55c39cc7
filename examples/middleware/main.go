// Command middleware is a tiny Go server that rate-limits its handlers with
// package httplimit, without the sluice gateway.
//
//	go run ./examples/middleware
//	curl -i -H 'X-Api-Key: k1' http://127.0.0.1:8080/hello
//
// Each API key gets 5 requests at once and 1 more per second; the key
// "demo1234" gets 100 and 10 per second. Requests without a key share one
// anonymous budget. All clients together get at most 1000 requests a minute.
package main

import (
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

const addr = "127.0.0.1:8080"

func main() {
	store, err := memory.New(memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	h, err := newHandler(store, nil)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("listening on http://%s/hello", addr)
	log.Fatal(srv.ListenAndServe())
}

// newHandler returns the server's routes, rate-limited on store. A nil clock
// means the system clock.
func newHandler(store ratelimit.Store, clock ratelimit.Clock) (http.Handler, error) {
	perKey := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-key", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	vip := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "vip", Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 10})
	global := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Minute})

	apiKey, err := httplimit.ParseKeys([]string{"header:X-Api-Key"})
	if err != nil {
		return nil, err
	}
	all, err := httplimit.ParseKeys([]string{"const:all"})
	if err != nil {
		return nil, err
	}
	limit, err := httplimit.New(httplimit.Options{
		Route: "hello",
		Store: store,
		Clock: clock,
		Limits: []httplimit.Limit{
			{
				Policy:     perKey,
				Key:        apiKey,
				OnEmptyKey: httplimit.EmptyKeyAnonymous,
				Overrides:  map[string]*ratelimit.Policy{"demo1234": vip},
			},
			{Policy: global, Key: all},
		},
		Observe: func(r httplimit.Request, ev *httplimit.Event) {
			if ev.Outcome != httplimit.OutcomeAdmitted {
				log.Printf("%s %s: %s", r.Method(), r.Path(), ev.Outcome)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /hello", limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	return mux, nil
}
