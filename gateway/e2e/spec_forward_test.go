package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// sendHost sends a GET with the Host header host (empty: the URL's) and
// header name/value pairs, and returns the read answer.
func sendHost(t *testing.T, url, host string, header ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return response{resp.StatusCode, string(b), resp.Header}
}

// TestSpecForwarding checks what the upstream receives (docs/operations.md,
// "What the upstream receives"):
// the upstream's host as Host by default and the client's with
// preserve_host; the upstream URL's base path joined with the request path
// after strip_prefix (stripping every segment leaves base + "/"); the query
// kept as sent; no hop-by-hop header; X-Forwarded-Proto and -Host set and
// the TCP peer appended to the X-Forwarded-For received.
func TestSpecForwarding(t *testing.T) {
	t.Parallel()
	up := newHostileUpstream(t)
	upHost := strings.TrimPrefix(up.URL, "http://")
	p := start(t, `store: {type: memory}`+header+`
routes:
  - id: based
    match: {path: /based/**}
    upstream: `+up.URL+`/base
    strip_prefix: 1
  - id: whole
    match: {path: /whole/*/*}
    upstream: `+up.URL+`/base
    strip_prefix: 3
  - id: beyond
    match: {path: /beyond}
    upstream: `+up.URL+`/base/
    strip_prefix: 3
  - id: kept
    match: {path: /kept/**}
    upstream: `+up.URL+`
    preserve_host: true
`)
	tests := []struct {
		name, path, host string
		header           []string
		wantURI          string // path and query as the upstream gets them
		wantHost         string
	}{
		{"base path, strip one segment, query kept", "/based/a/b%20c?x=1&y=two%20words&x=3", "", nil,
			"/base/a/b%20c?x=1&y=two%20words&x=3", upHost},
		{"strip every segment", "/whole/one/two", "", nil, "/base/", upHost},
		{"strip more segments than the path has", "/beyond?q=", "", nil, "/base/?q=", upHost},
		{"default Host is the upstream's", "/based/h", "client.example:8443", nil, "/base/h", upHost},
		{"preserve_host sends the client's Host", "/kept/h?k=v", "client.example:8443", nil, "/kept/h?k=v", "client.example:8443"},
	}
	for i, tt := range tests {
		before := up.count()
		r := sendHost(t, p.base+tt.path, tt.host, tt.header...)
		if r.code != 200 {
			t.Fatalf("%s: GET %s = %d %s", tt.name, tt.path, r.code, r.body)
		}
		reqs, _ := up.requests()
		if len(reqs) != before+1 {
			t.Fatalf("%s: the upstream saw %d requests, want 1", tt.name, len(reqs)-before)
		}
		got := reqs[len(reqs)-1]
		if got.RequestURI != tt.wantURI {
			t.Errorf("%d %s: upstream request URI %q, want %q", i, tt.name, got.RequestURI, tt.wantURI)
		}
		if got.Host != tt.wantHost {
			t.Errorf("%d %s: upstream Host %q, want %q", i, tt.name, got.Host, tt.wantHost)
		}
	}

	t.Run("hop-by-hop and X-Forwarded-*", func(t *testing.T) {
		before := up.count()
		r := sendHost(t, p.base+"/based/fwd", "front.example",
			"X-Forwarded-For", "203.0.113.7, 198.51.100.2",
			"X-Forwarded-Host", "spoofed.example",
			"X-Forwarded-Proto", "https",
			"Connection", "X-Hop-Named",
			"X-Hop-Named", "named in Connection",
			"Keep-Alive", "timeout=5",
			"Proxy-Connection", "keep-alive",
			"Proxy-Authorization", "Basic eDp4",
			"TE", "gzip",
			"Trailer", "X-Trailer",
			"X-End-To-End", "kept")
		if r.code != 200 {
			t.Fatalf("GET /based/fwd = %d %s", r.code, r.body)
		}
		reqs, _ := up.requests()
		if len(reqs) != before+1 {
			t.Fatalf("the upstream saw %d requests, want 1", len(reqs)-before)
		}
		got := reqs[len(reqs)-1]
		for _, h := range []string{"Connection", "X-Hop-Named", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te", "Trailer", "Upgrade"} {
			if v := got.Header.Values(h); len(v) > 0 {
				t.Errorf("the upstream got hop-by-hop %s: %q", h, v)
			}
		}
		if v := got.Header.Get("X-End-To-End"); v != "kept" {
			t.Errorf("end-to-end header X-End-To-End = %q, want kept", v)
		}
		if xff := strings.Join(got.Header.Values("X-Forwarded-For"), ", "); xff != "203.0.113.7, 198.51.100.2, 127.0.0.1" {
			t.Errorf("X-Forwarded-For = %q, want the client's list with the peer 127.0.0.1 appended", xff)
		}
		if v := got.Header.Values("X-Forwarded-Host"); len(v) != 1 || v[0] != "front.example" {
			t.Errorf("X-Forwarded-Host = %q, want [front.example] (the client's Host)", v)
		}
		if v := got.Header.Values("X-Forwarded-Proto"); len(v) != 1 || v[0] != "http" {
			t.Errorf("X-Forwarded-Proto = %q, want [http] (the gateway's listener)", v)
		}
	})
}

// TestSpecStreaming checks that a streamed response reaches the client as
// it comes (docs/operations.md, "What the upstream receives"): the upstream writes and flushes a first chunk, then
// writes the second only once the client has read the first.
func TestSpecStreaming(t *testing.T) {
	t.Parallel()
	firstRead := make(chan struct{})
	secondWritten := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first\n"))
		w.(http.Flusher).Flush()
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Second): // bound: the test failed
			return
		}
		w.Write([]byte("second\n"))
		close(secondWritten)
	}))
	t.Cleanup(up.Close)
	p := start(t, `store: {type: memory}`+header+`
policies:
  some: {algorithm: token_bucket, capacity: 5, rate: 0.001}
routes:
  - id: stream
    match: {path: /stream}
    upstream: `+up.URL+`
    limits: [{policy: some, key: ip}]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/stream", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("status %d, X-RateLimit-Remaining %q; want 200 through the limit", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	br := bufio.NewReader(resp.Body)
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := br.ReadString('\n')
		got <- line{s, err}
	}()
	select {
	case l := <-got:
		if l.err != nil || l.s != "first\n" {
			t.Fatalf("first chunk: %q, %v", l.s, l.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first chunk did not reach the client within 10s while the upstream waited: the gateway buffers streamed responses")
	}
	select {
	case <-secondWritten:
		t.Fatal("the second chunk was written before the client read the first")
	default:
	}
	close(firstRead)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Errorf("rest of the stream: %q, %v; want \"second\\n\"", rest, err)
	}
}
