package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMalformedQueryIs400: a query string that does not parse is answered
// 400 problem+json and never forwarded, where ReverseProxy would have sent
// the upstream what was left of it. A valid query goes through untouched.
func TestMalformedQueryIs400(t *testing.T) {
	up, got := recordingUpstream(t)
	g := newTestGateway(t, testConfig(upstreamRoute("api", "/api", up.URL)))
	front := httptest.NewServer(g)
	defer front.Close()
	for _, q := range []string{"a=1;b=2", "good=1&bad=%zz", "x=%", "k=%4"} {
		got.Store(nil)
		resp, err := http.Get(front.URL + "/api?" + q)
		if err != nil {
			t.Fatal(err)
		}
		body := problemBody(t, resp, http.StatusBadRequest)
		resp.Body.Close()
		if !strings.Contains(body["detail"].(string), "query") {
			t.Errorf("?%s: detail %q does not say what is wrong", q, body["detail"])
		}
		if s := got.Load(); s != nil {
			t.Errorf("?%s reached the upstream as %s?%s", q, s.Path, s.RawQuery)
		}
	}
	resp, err := http.Get(front.URL + "/api?a=1&b=%20x+y&c=%3B")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := got.Load(); resp.StatusCode != 200 || s == nil || s.RawQuery != "a=1&b=%20x+y&c=%3B" {
		t.Errorf("a valid query: status %d, upstream saw %+v", resp.StatusCode, s)
	}
}
