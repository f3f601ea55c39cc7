package gateway

import (
	"testing"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/store/fallback"
	"github.com/sluice-gw/sluice/store/redis"
)

// TestConfigModesAreLibraryModes checks that each store.on_error and
// store.redis.mode value config accepts is, converted as the gateway converts
// it, one of the library's own modes: config holds these as strings (it may
// not import store/fallback or store/redis) and the gateway converts them
// once, so the spellings must agree.
func TestConfigModesAreLibraryModes(t *testing.T) {
	onError := map[string]fallback.Mode{
		config.OnErrorLocal: fallback.Local,
		config.OnErrorAllow: fallback.Allow,
		config.OnErrorDeny:  fallback.Deny,
	}
	for s, want := range onError {
		if got := fallback.Mode(s); got != want {
			t.Errorf("fallback.Mode(config %q) = %q, want %q", s, got, want)
		}
	}
	redisModes := map[string]redis.Mode{
		config.RedisStandalone: redis.Standalone,
		config.RedisSentinel:   redis.Sentinel,
		config.RedisCluster:    redis.Cluster,
	}
	for s, want := range redisModes {
		if got := redis.Mode(s); got != want {
			t.Errorf("redis.Mode(config %q) = %q, want %q", s, got, want)
		}
	}
}
