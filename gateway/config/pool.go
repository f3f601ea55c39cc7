package config

import "time"

// Pool is a route's several upstream targets (a route's `pool`, in place
// of `upstream`): how a request picks one, when a target is taken out of
// rotation and put back, and how often a request that could not reach a
// target is tried on another.
type Pool struct {
	// Targets are the upstream URLs, each as `upstream` takes one; all of
	// one scheme. At least one.
	Targets []string `yaml:"targets"`
	// Balance is how a request picks a target: round_robin (the default),
	// least_conn (the fewest requests in flight) or hash (consistent
	// hashing on HashKey, so that one client sticks to one target while
	// the targets stay).
	Balance Balance `yaml:"balance"`
	// HashKey is the key spec hash balancing hashes (header:NAME, ip,
	// cookie:NAME, ...); required with balance: hash, refused otherwise.
	HashKey string `yaml:"hash_key"`
	// Retries bounds how many other targets a request is tried on when it
	// could not reach one: only GET, HEAD and OPTIONS, and only when no
	// byte of the request reached the failed target. Default 1; 0 turns
	// retries off.
	Retries *int `yaml:"retries"`
	// Passive takes a target out of rotation after connection failures.
	Passive PassiveHealth `yaml:"passive"`
	// HealthCheck, when set, probes each target and keeps those that fail
	// out of rotation.
	HealthCheck *HealthCheck `yaml:"health_check"`
}

// Balance is pool.balance.
type Balance string

// The values of pool.balance.
const (
	BalanceRoundRobin Balance = "round_robin"
	BalanceLeastConn  Balance = "least_conn"
	BalanceHash       Balance = "hash"
)

// PassiveHealth is pool.passive: a target that fails Failures requests in
// a row at the connection (refused, reset before an answer, timed out
// connecting) is out of rotation for EjectFor, then tried again.
type PassiveHealth struct {
	// Failures in a row that eject a target. Default 3; 0 turns passive
	// ejection off.
	Failures *int `yaml:"failures"`
	// EjectFor is how long an ejected target stays out. Default 30s.
	EjectFor time.Duration `yaml:"eject_for"`
}

// HealthCheck is pool.health_check: an HTTP GET of Path on each target
// every Interval, healthy on a 2xx or 3xx answer within Timeout.
type HealthCheck struct {
	// Path is the path probed, starting with "/". Required.
	Path string `yaml:"path"`
	// Interval between two probes of a target. Default 5s.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one probe. Default 1s; below Interval.
	Timeout time.Duration `yaml:"timeout"`
	// HealthyThreshold is the passing probes in a row that put an
	// unhealthy target back. Default 2.
	HealthyThreshold int `yaml:"healthy_threshold"`
	// UnhealthyThreshold is the failing probes in a row that take a
	// healthy target out. Default 3.
	UnhealthyThreshold int `yaml:"unhealthy_threshold"`
}

// UpstreamTLS is a route's `upstream_tls`: how sluice verifies and
// authenticates itself to an upstream over TLS (https:// and h2://
// upstreams and pool targets; refused on a route whose upstream is http://
// or h2c://, which is spoken to in cleartext). A relative path is relative
// to the configuration file's directory, as server.tls's are. The files
// are read when the configuration is loaded and on every reload.
type UpstreamTLS struct {
	// CAFile is a PEM file of the authorities the upstream's certificate
	// is verified against; empty means the system's roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name sent by SNI and verified in the upstream's
	// certificate; empty means the target's host.
	ServerName string `yaml:"server_name"`
	// CertFile and KeyFile are a client certificate and its key, PEM,
	// presented to an upstream that asks for one (mutual TLS); both or
	// neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}
