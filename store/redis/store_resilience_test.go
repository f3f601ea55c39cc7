package redis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// storeConns returns the ids of the store's connections (client name
// "sluice") in CLIENT LIST.
func storeConns(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	v, err := srv.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	str, _ := v.(string)
	var ids []string
	for line := range strings.Lines(str) {
		if strings.Contains(line, " name=sluice ") {
			id, _, _ := strings.Cut(line, " ")
			ids = append(ids, id)
		}
	}
	return ids
}

// TestTimeoutKeepsConnection (docs/reliability.md row B2): a call that times out while
// Redis hangs abandons its reply but not the connection, so a short stall
// costs no redial, and the calls after it go on on the same connection as
// soon as Redis answers. (In rueidis' sync mode, a timeout closed the
// connection: each probe of a hung Redis opened a new one, and after
// recovery every spurious timeout cost a redial.)
func TestTimeoutKeepsConnection(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Timeout: 50 * time.Millisecond})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	req := ratelimit.Request{Key: "k", Policy: p}
	// Connect (the first call waits for the client no longer than 50ms).
	out := make([]ratelimit.Decision, 1)
	for start := time.Now(); ; {
		if _, err := s.Evaluate(context.Background(), []ratelimit.Request{req}, out); err == nil {
			break
		} else if time.Since(start) > 5*time.Second {
			t.Fatal(err)
		}
	}
	before := storeConns(t, srv)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, err := s.Evaluate(context.Background(), []ratelimit.Request{req}, out)
		if ErrorKind(err) != "timeout" {
			srv.Cont()
			t.Fatalf("call %d while Redis is stopped: %v, want a timeout", i, err)
		}
	}
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	var last ratelimit.Decision
	for range 5 {
		_, o := evaluate(t, s, req)
		last = o[0]
	}
	after := storeConns(t, srv)
	// Each script ran at most once: the five after Redis came back, the
	// first one, and of the three that timed out those that were written
	// before the stop (none is re-sent; one whose connection was still
	// being set up was never written).
	if taken := 100 - last.Remaining; taken < 1+5 || taken > 1+3+5 {
		t.Errorf("%d taken, want 6 to 9 (each script, timed out or not, ran at most once)", taken)
	}
	// rueidis may open its second pipe meanwhile; none may be closed.
	for _, id := range before {
		if !slices.Contains(after, id) {
			t.Errorf("store connections %v before 3 timeouts, %v after: %s was closed (a timeout must not close the connection)", before, after, id)
		}
	}
}
