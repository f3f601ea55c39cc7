package gateway

import (
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/store/fallback"
	"github.com/sluice-gw/sluice/store/redis"
)

// TestConfigModesAreLibraryModes checks that fallbackMode and redisMode turn
// each store.on_error and store.redis.mode value config accepts into the
// library's own mode, and pass any other value through for the library to
// refuse.
func TestConfigModesAreLibraryModes(t *testing.T) {
	onError := map[config.OnError]fallback.Mode{
		config.OnErrorLocal: fallback.Local,
		config.OnErrorAllow: fallback.Allow,
		config.OnErrorDeny:  fallback.Deny,
		"":                  "",
		"retry":             "retry",
	}
	for m, want := range onError {
		if got := fallbackMode(m); got != want {
			t.Errorf("fallbackMode(%q) = %q, want %q", m, got, want)
		}
	}
	redisModes := map[config.RedisMode]redis.Mode{
		config.RedisStandalone: redis.Standalone,
		config.RedisSentinel:   redis.Sentinel,
		config.RedisCluster:    redis.Cluster,
		"":                     "",
		"replicated":           "replicated",
	}
	for m, want := range redisModes {
		if got := redisMode(m); got != want {
			t.Errorf("redisMode(%q) = %q, want %q", m, got, want)
		}
	}
	if _, err := fallback.New(fallback.Options{Mode: fallbackMode("retry")}); err == nil || !strings.Contains(err.Error(), `unknown mode "retry"`) {
		t.Errorf(`fallback.New with on_error "retry": error %v, want one naming the unknown mode`, err)
	}
	if s, err := redis.New(redis.Options{Mode: redisMode("replicated"), Addrs: []string{"127.0.0.1:1"}}); err == nil || !strings.Contains(err.Error(), `unknown mode "replicated"`) {
		if err == nil {
			s.Close()
		}
		t.Errorf(`redis.New with mode "replicated": error %v, want one naming the unknown mode`, err)
	}
}
