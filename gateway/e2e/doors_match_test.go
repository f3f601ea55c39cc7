package e2e

import "testing"

// The door rows of matching: which route a request, or the original
// request a forward-auth proxy describes, is decided by. A request that a
// limited route was meant to take must never fall through to a later,
// looser route: not by a raw "#" that the upstream reads as the end of the
// path, and not by a HEAD that runs the upstream's GET handler.

// authOriginal is an auth request to doorConfig's x-original forward-auth
// routes, in the shape of docs/forward-auth.md's nginx recipe.
func authOriginal(user, method, uri string) string {
	return "GET /_auth/original HTTP/1.1\r\nHost: sluice\r\nX-Original-Method: " + method +
		"\r\nX-Original-URI: " + uri + "\r\nX-Forwarded-Host: app.test\r\nX-User-Id: " + user + "\r\n\r\n"
}

// authForwarded is an auth request to doorConfig's x-forwarded routes, as
// Traefik and Caddy send it.
func authForwarded(user, method, uri string) string {
	return "GET /_auth/forwarded HTTP/1.1\r\nHost: sluice\r\nX-Forwarded-Method: " + method +
		"\r\nX-Forwarded-Uri: " + uri + "\r\nX-Forwarded-Host: app.test\r\nX-User-Id: " + user + "\r\n\r\n"
}

func TestDoorRowsMatch(t *testing.T) {
	t.Parallel()
	up := newWireUpstream(t, nil)
	login := func(user, target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nX-User-Id: " + user + "\r\nContent-Length: 0\r\n\r\n"
	}
	runDoorRows(t, doorConfig(up.URL), up, 9, []doorRow{
		{
			name: `a raw "#" in the request-target is refused, not matched as a path byte`,
			send: []string{
				login("match-1", "/login"),
				login("match-1", "/login"),
				login("match-1", "/login#1"),
			},
			status:   []int{200, 429, 400},
			header:   map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent},
			body:     `request-target holds a raw \"#\"`,
			upstream: 1,
			upNot:    []string{"#"},
		},
		{
			name:     `a raw "#" in the query of the request-target is refused too`,
			send:     []string{"GET /api/a?x=1#frag HTTP/1.1\r\nHost: x\r\nX-User-Id: match-2\r\n\r\n"},
			status:   []int{400},
			header:   map[string]string{"Content-Type": "application/problem+json"},
			body:     "request-target",
			upstream: 0,
		},
		{
			name:     `an escaped "%23" is a path byte: the literal segment, forwarded as it came`,
			send:     []string{"GET /api/a%23b HTTP/1.1\r\nHost: x\r\nX-User-Id: match-3\r\n\r\n"},
			status:   []int{200},
			header:   map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "9"},
			body:     "upstream /api/a#b",
			upstream: 1,
			upSees:   []string{"GET /api/a%23b HTTP/1.1"},
		},
		{
			name: `X-Original-URI "/login#1" after "/login" was refused is a 400, never the next route's 200`,
			send: []string{
				authOriginal("match-4", "POST", "/login"),
				authOriginal("match-4", "POST", "/login"),
				authOriginal("match-4", "POST", "/login#1"),
			},
			status:   []int{200, 429, 400},
			header:   map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent},
			body:     `X-Original-URI header holds a raw \"#\"`,
			upstream: 0,
		},
		{
			name: `X-Forwarded-Uri with a raw "#" is a 400`,
			send: []string{
				authForwarded("match-5", "POST", "/login"),
				authForwarded("match-5", "POST", "/login"),
				authForwarded("match-5", "POST", "/login#"),
			},
			status:   []int{200, 429, 400},
			header:   map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent},
			body:     `X-Forwarded-Uri header holds a raw \"#\"`,
			upstream: 0,
		},
		{
			name:     `an escaped "%23" in X-Original-URI is a path byte, decided by the route it matches`,
			send:     []string{authOriginal("match-6", "GET", "/reports/a%23b")},
			status:   []int{200},
			header:   map[string]string{"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0"},
			upstream: 0,
		},
		{
			name: "a HEAD on a GET-only limited route counts against its limit and never reaches the catch-all",
			send: []string{
				"HEAD /reports/q1 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-7\r\n\r\n",
				"GET /reports/q1 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-7\r\n\r\n",
				"HEAD /reports/q1 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-7\r\n\r\n",
			},
			status:   []int{200, 429, 429},
			header:   map[string]string{"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "Retry-After": "~"},
			upstream: 1,
			upSees:   []string{"HEAD /reports/q1 HTTP/1.1"},
			upNot:    []string{"GET /reports/q1"},
		},
		{
			name: "a HEAD after the GET-only route refused a GET is refused too: the upstream sees nothing more",
			send: []string{
				"GET /reports/q2 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-8\r\n\r\n",
				"GET /reports/q2 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-8\r\n\r\n",
				"HEAD /reports/q2 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-8\r\n\r\n",
				"HEAD /reports/q2 HTTP/1.1\r\nHost: x\r\nX-User-Id: match-8\r\n\r\n",
			},
			status:   []int{200, 429, 429, 429},
			header:   map[string]string{"X-RateLimit-Limit": "1", "Retry-After": "~"},
			upstream: 1,
			upNot:    []string{"HEAD /reports"},
		},
		{
			name: "a forward-auth HEAD original is decided by the route whose match says methods: [GET]",
			send: []string{
				authOriginal("match-9", "HEAD", "/reports/q3"),
				authOriginal("match-9", "HEAD", "/reports/q3"),
				authOriginal("match-9", "GET", "/reports/q3"),
			},
			status:   []int{200, 429, 429},
			header:   map[string]string{"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "Retry-After": "~"},
			upstream: 0,
		},
	})
}
