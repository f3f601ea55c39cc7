package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// adminCall sends GET /admin/v1/stats from peer with the Authorization
// header auth ("" for none) and returns the status and Retry-After.
func adminCall(g *Gateway, peer, auth string) (int, string) {
	req := httptest.NewRequest("GET", "/admin/v1/stats", nil)
	req.RemoteAddr = peer
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	g.admin.ServeHTTP(rec, req)
	return rec.Code, rec.Header().Get("Retry-After")
}

// TestAdminLoginFailuresLimited: a client that sends
// adminLoginBurst is package admin's burst of failed logins per address
// (docs/operations.md, "The admin listener").
const adminLoginBurst = 10

// adminLoginBurst wrong tokens is answered 429 with Retry-After, even with
// the right token, until one failure has been forgiven; other clients and
// requests without credentials are not affected.
func TestAdminLoginFailuresLimited(t *testing.T) {
	clock := kit.NewManualClock(time.Unix(1764100000, 0))
	g, err := New(adminConfig(), Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const (
		attacker = "192.0.2.7:4000"
		other    = "198.51.100.9:4000"
		wrong    = "Bearer wrong-token"
		right    = "Bearer tok"
	)
	for i := range adminLoginBurst {
		if code, _ := adminCall(g, attacker, wrong); code != 401 {
			t.Fatalf("wrong token #%d = %d, want 401", i+1, code)
		}
	}
	for _, auth := range []string{wrong, right} {
		code, ra := adminCall(g, attacker, auth)
		if code != 429 || ra != "6" {
			t.Errorf("after %d failures, %q = %d Retry-After %q, want 429 Retry-After 6", adminLoginBurst, auth, code, ra)
		}
	}
	if code, _ := adminCall(g, other, right); code != 200 {
		t.Errorf("another client with the right token = %d, want 200", code)
	}
	if code, _ := adminCall(g, "[2001:db8::2]:4000", wrong); code != 401 {
		t.Errorf("an IPv6 client's first failure = %d, want 401", code)
	}
	clock.Advance(6 * time.Second)
	if code, _ := adminCall(g, attacker, right); code != 200 {
		t.Errorf("6s later, the right token = %d, want 200", code)
	}
	if code, _ := adminCall(g, attacker, wrong); code != 401 {
		t.Errorf("6s later, one more wrong token = %d, want 401", code)
	}
	if code, _ := adminCall(g, attacker, wrong); code != 429 {
		t.Errorf("then another wrong token = %d, want 429", code)
	}
}

// TestAdminLoginWithoutCredentials: a browser's first request carries no
// credentials and gets the 401 challenge; those never count as failures.
func TestAdminLoginWithoutCredentials(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for i := range 3 * adminLoginBurst {
		if code, _ := adminCall(g, "192.0.2.7:4000", ""); code != 401 {
			t.Fatalf("request #%d without credentials = %d, want 401", i+1, code)
		}
	}
	if code, _ := adminCall(g, "192.0.2.7:4000", "Bearer tok"); code != 200 {
		t.Errorf("then the right token = %d, want 200", code)
	}
}

// TestAdminTokenLengths: tokens that share a prefix with the configured one,
// or extend it, are refused like any other wrong token.
func TestAdminTokenLengths(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for i, auth := range []string{"Bearer t", "Bearer to", "Bearer tokk", "Bearer tok\x00", "Bearer TOK"} {
		if code, _ := adminCall(g, "192.0.2."+string(rune('1'+i))+":1", auth); code != 401 {
			t.Errorf("%q = %d, want 401", auth, code)
		}
	}
}

// TestAdminLoginFailuresSurviveReload: the gateway built on reload takes
// over the failure counts, so a reload forgives nothing.
func TestAdminLoginFailuresSurviveReload(t *testing.T) {
	clock := kit.NewManualClock(time.Unix(1764100000, 0))
	g1, err := New(adminConfig(), Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for range adminLoginBurst {
		adminCall(g1, "192.0.2.7:4000", "Bearer wrong")
	}
	g2, err := New(adminConfig(), Deps{Clock: clock, Previous: g1})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	g1.Close()
	if code, _ := adminCall(g2, "192.0.2.7:4000", "Bearer tok"); code != 429 {
		t.Errorf("after a reload, the limited client = %d, want 429", code)
	}
}

// TestAdminLoginOverflowSparesTheRightToken: clients
// from more source addresses than the login table tracks (4,096) send
// wrong tokens over real connections, so that failures from the last ones
// share the overflow budget and use it up. The overflow budget still
// refuses their failures, but an operator at one more address with the
// right token gets in. The clock stands still, so that no failure is
// forgiven however long the 4,400 connections take.
func TestAdminLoginOverflowSparesTheRightToken(t *testing.T) {
	clock := kit.NewManualClock(time.Unix(1764100000, 0))
	g, err := New(adminConfig(), Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	front := httptest.NewServer(g.admin)
	defer front.Close()
	const attackers = 4400
	peer := func(i int) string { return fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250) }
	var refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, attackers)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				code, err := adminDial(front.Listener.Addr().String(), peer(i), "Bearer wrong-token")
				switch {
				case err != nil:
					errs <- err
				case code == 429:
					refused.Add(1)
				case code != 401:
					errs <- fmt.Errorf("wrong token from %s = %d, want 401 or 429", peer(i), code)
				}
			}
		})
	}
	for i := range attackers {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// 4,096 addresses have budgets of their own; the rest share the
	// overflow budget, which takes adminLoginBurst failures.
	if want := int64(attackers - 4096 - adminLoginBurst); refused.Load() != want {
		t.Errorf("%d of the failures from %d addresses were refused, want %d (past the table and the overflow budget)", refused.Load(), attackers, want)
	}
	operator := peer(attackers + 1)
	if code, err := adminDial(front.Listener.Addr().String(), operator, "Bearer tok"); err != nil || code != 200 {
		t.Errorf("the right token from %s after the table filled = %d (%v), want 200", operator, code, err)
	}
	if code, err := adminDial(front.Listener.Addr().String(), operator, "Bearer wrong-token"); err != nil || code != 429 {
		t.Errorf("a wrong token from %s after the overflow budget ran out = %d (%v), want 429", operator, code, err)
	}
}

// adminDial sends GET /admin/v1/stats to addr over a new connection from
// the loopback address local, with the Authorization header auth, and
// returns the status.
func adminDial(addr, local, auth string) (int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /admin/v1/stats HTTP/1.1\r\nHost: sluice\r\nAuthorization: %s\r\nConnection: close\r\n\r\n", auth); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}
