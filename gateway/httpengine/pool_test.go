package httpengine_test

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/gatewaytest"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// counter is a test upstream that counts the requests it answers.
type counter struct {
	name string
	mu   sync.Mutex
	n    map[string]int // by method
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	c.mu.Lock()
	c.n[r.Method]++
	c.mu.Unlock()
	fmt.Fprint(w, c.name)
}

func (c *counter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// poolFixture is newFixture's four protocols in front of a route whose
// pool has two live targets and one that refuses connections.
func poolFixture(t *testing.T, balance string) (*fixture, []*counter) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, pool := testcert.SelfSigned(t, dir)
	ups := []*counter{{name: "a", n: map[string]int{}}, {name: "b", n: map[string]int{}}}
	targets := []string{}
	for _, u := range ups {
		targets = append(targets, "http://"+testkit.Serve(t, (&http.Server{Handler: u, ReadHeaderTimeout: 5 * time.Second}).Serve))
	}
	targets = append(targets, "http://"+testkit.ClosedAddr(t))
	yaml := fmt.Sprintf(`
server:
  listen: 127.0.0.1:0
  tls:
    listen: 127.0.0.1:0
    certificates: [{cert_file: %q, key_file: %q}]
  http2: {h2c: true}
admin: {listen: 127.0.0.1:0}
store: {type: memory}
routes:
  - id: fleet
    match: {path: /fleet/**}
    pool:
      targets: [%s]
      balance: %s
      hash_key: %s
      retries: 2
      passive: {failures: 1000}
`, certFile, keyFile, strings.Join(targets, ", "), balance, map[bool]string{true: "header:X-User", false: `""`}[balance == "hash"])
	cfg, err := config.Parse(filepath.Join(dir, "sluice.yaml"), []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	srv := gatewaytest.Start(t, gatewaytest.New(t, cfg, gateway.Deps{}))
	return clientsFor(t, srv, pool), ups
}

// TestPoolRetries: over every protocol, a GET that meets the target that
// refuses connections is tried on another and answered 200, the live
// targets share the requests, and a POST is never tried twice: it is
// answered 502 when its target refuses.
func TestPoolRetries(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			f, ups := poolFixture(t, "round_robin")
			for i := range 30 {
				if a := f.do(t, proto, "GET", fmt.Sprintf("/fleet/%d", i), nil, ""); a.status != 200 {
					t.Fatalf("GET %d: %d %q, want 200 (retried past the refusing target)", i, a.status, a.body)
				}
			}
			for _, u := range ups {
				if n := u.count("GET"); n < 5 {
					t.Errorf("target %s answered %d of 30 GETs, want its share (at least 5)", u.name, n)
				}
			}
			statuses := map[int]int{}
			for i := range 30 {
				statuses[f.do(t, proto, "POST", fmt.Sprintf("/fleet/%d", i), nil, "x").status]++
			}
			posts := ups[0].count("POST") + ups[1].count("POST")
			if statuses[200] != posts || statuses[502] != 30-posts || statuses[502] == 0 {
				t.Errorf("POSTs: %v, with %d reaching a live target; want the others 502, never retried", statuses, posts)
			}
		})
	}
}

// TestPoolHash: hash balancing sends each key's requests to one target.
func TestPoolHash(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			f, _ := poolFixture(t, "hash")
			for _, user := range []string{"ann", "bob", "cy", "dee"} {
				first := ""
				for range 5 {
					a := f.do(t, proto, "GET", "/fleet/x", map[string]string{"X-User": user}, "")
					if a.status != 200 {
						t.Fatalf("%s: %d", user, a.status)
					}
					if first == "" {
						first = a.body
					} else if a.body != first {
						t.Errorf("%s went to %s and %s", user, first, a.body)
					}
				}
			}
		})
	}
}
