package config

import (
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Defaults. Each is documented on its field.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultShutdownTimeout   = 15 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 16 << 10
	DefaultMaxConns          = 4096
	DefaultAdminListen       = "127.0.0.1:9090"
	DefaultStorePrefix       = "sluice"
	DefaultStoreTimeout      = 50 * time.Millisecond
	DefaultMemoryMaxKeys     = 1 << 20 // store/memory's DefaultMaxKeys
	DefaultLocalDenyMaxKeys  = 100_000 // store/localdeny's DefaultMaxKeys
	DefaultRouteTimeout      = 30 * time.Second
	DefaultRespondStatus     = 200
	DefaultDenyStatus        = 429
	DefaultCost              = 1
	DefaultReloadSettle      = 2 * time.Second
)

// ApplyDefaults fills every unset field of c that has a default. It is the
// one place defaults live; it validates nothing and leaves set fields alone,
// so applying it twice changes nothing. [Load] and [Parse] call it; call it
// yourself on a Config built in Go before [Config.Validate].
//
// Zero means unset, so an explicit zero where zero is not allowed (say
// "timeout: 0s") is caught by Load and Parse, which know what the file
// said, before defaults are applied.
func ApplyDefaults(c *Config) {
	s := &c.Server
	setDefault(&s.Listen, DefaultListen)
	setDefault(&s.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&s.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&s.IdleTimeout, DefaultIdleTimeout)
	setDefault(&s.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setDefault(&s.MaxConns, DefaultMaxConns)
	applyTLSDefaults(s)

	setDefault(&c.Admin.Listen, DefaultAdminListen)
	observeDefaults(c)

	st := &c.Store
	setDefault(&st.Type, StoreMemory)
	setDefault(&st.Prefix, DefaultStorePrefix)
	setDefault(&st.Timeout, DefaultStoreTimeout)
	setDefault(&st.OnError, OnErrorLocal)
	setDefault(&st.Redis.Mode, RedisStandalone)
	setDefault(&st.Memory.MaxKeys, DefaultMemoryMaxKeys)
	if st.LocalDeny.Enabled == nil {
		st.LocalDeny.Enabled = new(true)
	}
	setDefault(&st.LocalDeny.MaxKeys, DefaultLocalDenyMaxKeys)

	applyRLSDefaults(c.RLS)
	applySheddingDefaults(c.Shedding)

	for name, p := range c.Policies {
		if p.Algorithm == ratelimit.LeakyBucket && p.Mode == "" {
			p.Mode = ratelimit.Police
			c.Policies[name] = p
		}
	}

	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Proxied() {
			setDefault(&r.Timeout, DefaultRouteTimeout)
		}
		applyPoolDefaults(r.Pool)
		if r.Respond != nil {
			setDefault(&r.Respond.Status, DefaultRespondStatus)
		}
		if r.ForwardAuth != nil {
			setDefault(&r.ForwardAuth.DenyStatus, DefaultDenyStatus)
		}
		for j := range r.Limits {
			l := &r.Limits[j]
			setDefault(&l.Cost, DefaultCost)
		}
	}
}

// setDefault sets *p to def when *p is the zero value.
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
