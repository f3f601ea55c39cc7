package redis

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// logBuffer collects log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// warnings returns the WARN lines that contain substr.
func (l *logBuffer) warnings(substr string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// appUser is a least-privilege ACL user as people deploy them: every
// command but the dangerous ones, ROLE and CONFIG among them.
const appUser = "app on >apw ~* &* +@all -@dangerous"

// TestSentinelACLUser is Redis secured as Helm charts deploy it: sentinels
// behind a password, and the gateway's own ACL user that may not run ROLE.
// The store decides on the master; it warns once that the role cannot be
// verified; and a master demoted to a replica (which the user cannot ask
// ROLE either) is still left on the first READONLY of a write.
func TestSentinelACLUser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sentinel setup")
	}
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{Password: "pw", SentinelPassword: "spw", Users: []string{appUser}})
	old := sentinelRefresh
	sentinelRefresh = 0 // only the store's own checks may move it
	t.Cleanup(func() { sentinelRefresh = old })
	var logs logBuffer
	s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName(),
		Username: "app", Password: "apw", SentinelPassword: "spw", Timeout: 2 * time.Second, Logger: logs.logger()})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	req := ratelimit.Request{Key: "before", Policy: p}
	untilDecided(t, s, req, 10*time.Second)
	if key := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]; !exists(t, sn.Master, key) {
		t.Errorf("key %s not on the master", key)
	}
	if w := logs.warnings("ROLE"); len(w) != 1 {
		t.Errorf("%d warnings about ROLE, want 1:\n%s", len(w), logs.String())
	}

	repoint(t, sn)
	if _, err := sn.Master.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(sn.Replica.Port())); err != nil {
		t.Fatal(err)
	}
	req = ratelimit.Request{Key: "after", Policy: p}
	took, kinds := untilDecided(t, s, req, 10*time.Second)
	t.Logf("decided on Redis %v after the demotion (errors meanwhile %v); re-resolutions %d",
		took.Round(time.Millisecond), kinds, s.resolves.Load())
	if s.resolves.Load() == 0 {
		t.Error("the store never re-resolved the master")
	}
	if key := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]; !exists(t, sn.Replica, key) {
		t.Errorf("key %s not on the promoted master", key)
	}
	if w := logs.warnings("ROLE"); len(w) != 1 {
		t.Errorf("%d warnings about ROLE after the re-resolution, want still 1:\n%s", len(w), logs.String())
	}
}

// TestSentinelPasswordProtected is the sentinels behind a password with the
// default user on the data nodes: every check of the store (ROLE, and the
// sentinels' answer) authenticates to each side with its own credentials.
func TestSentinelPasswordProtected(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sentinel setup")
	}
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{Password: "pw", SentinelPassword: "spw"})
	var logs logBuffer
	s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName(),
		Password: "pw", SentinelPassword: "spw", Timeout: 2 * time.Second, Logger: logs.logger()})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	req := ratelimit.Request{Key: "k", Policy: p}
	untilDecided(t, s, req, 10*time.Second)
	if key := appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]; !exists(t, sn.Master, key) {
		t.Errorf("key %s not on the master", key)
	}
	if w := logs.warnings(""); len(w) != 0 {
		t.Errorf("warnings with a user that may run ROLE:\n%s", strings.Join(w, "\n"))
	}
}

// TestSentinelACLUserFollowsSentinels: with a user that may not run ROLE
// the store hears no +switch-master, so it re-asks the sentinels on its
// own; when they name another master while the old one still takes writes,
// the next decisions move there.
func TestSentinelACLUserFollowsSentinels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sentinel setup")
	}
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{Password: "pw", SentinelPassword: "spw", Users: []string{appUser}})
	old := sentinelRefresh
	sentinelRefresh = 50 * time.Millisecond
	t.Cleanup(func() { sentinelRefresh = old })
	s := mustNew(t, Options{Mode: Sentinel, Addrs: sn.SentinelAddrs(), MasterName: sn.MasterName(),
		Username: "app", Password: "apw", SentinelPassword: "spw", Timeout: 2 * time.Second})
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	untilDecided(t, s, ratelimit.Request{Key: "before", Policy: p}, 10*time.Second)
	repoint(t, sn)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		req := ratelimit.Request{Key: "after-" + strconv.Itoa(i), Policy: p}
		untilDecided(t, s, req, 10*time.Second)
		if exists(t, sn.Replica, appendKeys(nil, s.prefix, tag(req.Key), specOf(p))[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions still on the old master 20s after the sentinels named %s", sn.Replica.Addr())
		}
		time.Sleep(20 * time.Millisecond) // waiting for the store's own poll, bounded
	}
}
