package redis

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
)

func TestKeyLayout(t *testing.T) {
	tb := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 1})
	sl := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: 1e9})
	for _, key := range append(hostileValues(200), strings.Repeat("x", 100_000), "}", "sluice:{x}:tb") {
		tg := tag(key)
		if len(tg) != tagLen || strings.ContainsAny(tg, "{}:") {
			t.Fatalf("tag(%q) = %q: want %d characters without braces or colons", key, tg, tagLen)
		}
		for _, p := range []*ratelimit.Policy{tb, sl} {
			for _, k := range appendKeys(nil, "sluice", tg, specOf(p)) {
				// Redis hashes the text between the first { and the next }:
				// it must be the tag itself.
				open := strings.IndexByte(k, '{')
				end := strings.IndexByte(k[open:], '}')
				if !strings.HasPrefix(k, "sluice:{") || k[open+1:open+end] != tg {
					t.Fatalf("key %q for %q: hash tag is not %q", k, key, tg)
				}
			}
		}
	}
}

// TestSlotMatchesRedis checks the store's own CRC16 slot computation, used
// to group limits by slot, against CLUSTER KEYSLOT.
func TestSlotMatchesRedis(t *testing.T) {
	c := clusterRedis(t)
	for _, key := range hostileValues(300) {
		k := appendKeys(nil, "sluice", tag(key), &specs[0])[0]
		want, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := slot(tag(key)); int64(got) != want {
			t.Fatalf("slot(%q) = %d, CLUSTER KEYSLOT = %d", k, got, want)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string // substring of the error; empty means valid
	}{
		{"zero value", Options{}, ""},
		{"sentinel", Options{Mode: Sentinel, MasterName: "m", Addrs: []string{"127.0.0.1:1"}}, ""},
		{"cluster", Options{Mode: Cluster, Addrs: []string{"127.0.0.1:1"}}, ""},
		{"unknown mode", Options{Mode: "ring"}, `unknown mode "ring"`},
		{"sentinel without master", Options{Mode: Sentinel}, "master name"},
		{"cluster db", Options{Mode: Cluster, DB: 2}, "db must be 0 in mode cluster"},
		{"negative db", Options{DB: -1}, "db must not be negative"},
		{"brace in prefix", Options{Prefix: "a{b}"}, "must not contain '{' or '}'"},
		{"negative timeout", Options{Timeout: -1}, "timeout must not be negative"},
		{"negative dial timeout", Options{DialTimeout: -1}, "dial timeout must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New(%+v) = %v, want no error", tc.opts, err)
				}
				s.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
			}
		})
	}
}
