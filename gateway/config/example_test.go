package config_test

import (
	"errors"
	"fmt"

	"github.com/sluice-gw/sluice/gateway/config"
)

func ExampleParse() {
	src := []byte(`
policies:
  per-user: {algorithm: token_bucket, capacity: 10, rate: "60/1m"}
routes:
  - id: api
    match: {path: /api/**}
    upstream: "http://${BACKEND:-127.0.0.1:8081}"
    limits:
      - {policy: per-user, key: header:X-User-Id}
`)
	env := map[string]string{"BACKEND": "10.0.0.5:8080"}
	c, err := config.Parse("sluice.yaml", src, func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Summary("sluice.yaml"))
	fmt.Println(c.Routes[0].Upstream, c.Routes[0].Timeout, c.Routes[0].Limits[0].Key)
	fmt.Println(c.Policy("per-user"))
	// Output:
	// sluice.yaml: ok: 1 route, 1 policy, 1 limit, memory store
	// http://10.0.0.5:8080 30s header:X-User-Id
	// token_bucket(capacity=10, rate=1/s)
}

func ExampleErrors() {
	src := []byte(`
policies:
  per-user: {algorithm: token_bucket, capacity: 10, rate: 1}
routes:
  - id: api
    match: {path: /api/**}
    upstream: http://127.0.0.1:8081
    limits:
      - {policy: per_user, key: ip}
      - {policy: per-user, key: ip, cost: 20}
`)
	_, err := config.Parse("sluice.yaml", src, nil)
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Println(e)
		}
	}
	// Output:
	// sluice.yaml:9:18: routes[0].limits[0].policy: unknown policy "per_user" (defined: per-user)
	// sluice.yaml:10:43: routes[0].limits[1].cost: cost 20 is above the capacity 10 of policy "per-user", so no request could ever be admitted
}
