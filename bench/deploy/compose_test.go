package deploy

import (
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-gw/sluice/gateway/config"
)

const deployDir = "../../deploy"

// composeFile is the part of the Compose format the repository's files
// use. Decoding is strict, so a field outside it (a typo, or one this test
// does not check) fails the test until it is added here.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build"`
	Image           string            `json:"image"`
	Entrypoint      []string          `json:"entrypoint"`
	Command         []string          `json:"command"`
	Environment     map[string]string `json:"environment"`
	Volumes         []string          `json:"volumes"`
	Ports           []string          `json:"ports"`
	ReadOnly        bool              `json:"read_only"`
	StopGracePeriod string            `json:"stop_grace_period"`
	DependsOn       map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck *struct {
		Test     []string `json:"test"`
		Interval string   `json:"interval"`
		Timeout  string   `json:"timeout"`
		Retries  int      `json:"retries"`
	} `json:"healthcheck"`
	Restart string `json:"restart"`
}

// interpolate replaces ${NAME:-default} by its default, as Compose does
// with NAME unset, and reports any variable without a default (which would
// make `docker compose up` depend on the caller's environment).
func interpolate(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	re := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)
	return re.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := re.FindSubmatch(m)
		if sub[2] == nil {
			t.Errorf("%s: %s has no default", name, m)
		}
		return sub[3]
	})
}

// loadCompose decodes a Compose file strictly, after Compose's
// interpolation and without its x- extension fields (anchors' homes).
func loadCompose(t *testing.T, name string) *composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.UnmarshalStrict(interpolate(t, name, data), &top); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k := range top {
		if strings.HasPrefix(k, "x-") {
			delete(top, k)
		}
	}
	j, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var f composeFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &f
}

// TestCompose checks deploy/compose.yaml and deploy/compose.sentinel.yaml:
// every service has an image; sluice is built from the
// repository's Dockerfile and serves the config file it mounts, which
// passes validation with the service's environment; its published ports
// are the config's listen ports, the admin one on the host's loopback
// only; the Redis addresses and upstreams it names are services of the
// file; the Redis password it gets is the one the Redis processes require;
// and the stop grace period covers server.shutdown_timeout.
func TestCompose(t *testing.T) {
	for _, name := range []string{"compose.yaml", "compose.sentinel.yaml"} {
		t.Run(name, func(t *testing.T) {
			f := loadCompose(t, name)
			for sname, s := range f.Services {
				if s.Image == "" {
					t.Errorf("service %s has no image", sname)
				}
				for dep := range s.DependsOn {
					if _, ok := f.Services[dep]; !ok {
						t.Errorf("service %s depends on %s, which is not a service", sname, dep)
					}
				}
			}
			s, ok := f.Services["sluice"]
			if !ok {
				t.Fatal("no sluice service")
			}
			if s.Build == nil {
				t.Fatal("the sluice service is not built from the repository")
			}
			if _, err := os.Stat(filepath.Join(deployDir, s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("build: %v", err)
			}
			cfg := composeSluiceConfig(t, &s)
			checkComposePorts(t, s.Ports, cfg)
			checkComposeNames(t, f, cfg)
			checkComposePassword(t, f, s.Environment["REDIS_PASSWORD"], cfg)
			grace, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil || grace <= cfg.Server.ShutdownTimeout {
				t.Errorf("stop_grace_period %q does not cover shutdown_timeout %v (%v)", s.StopGracePeriod, cfg.Server.ShutdownTimeout, err)
			}
		})
	}
}

// composeSluiceConfig loads the config the sluice service serves: the
// --config path of its command, mounted from a file beside the Compose file.
func composeSluiceConfig(t *testing.T, s *composeService) *config.Config {
	t.Helper()
	i := slices.Index(s.Command, "--config")
	if i < 0 || i+1 == len(s.Command) {
		t.Fatalf("the sluice command %v names no --config", s.Command)
	}
	target := s.Command[i+1]
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || parts[1] != target {
			continue
		}
		if len(parts) < 3 || parts[2] != "ro" {
			t.Errorf("volume %q is not read-only", v)
		}
		lookup := func(name string) (string, bool) { val, ok := s.Environment[name]; return val, ok }
		cfg, err := config.Load(filepath.Join(deployDir, parts[0]), lookup)
		if err != nil {
			t.Fatalf("%s with the service's environment:\n%v", parts[0], err)
		}
		return cfg
	}
	t.Fatalf("no volume mounts %s", target)
	return nil
}

// checkComposePorts checks the published ports against the listeners.
func checkComposePorts(t *testing.T, published []string, cfg *config.Config) {
	t.Helper()
	find := func(addr string) (hostIP string, ok bool) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("listen %q: %v", addr, err)
		}
		for _, p := range published {
			parts := strings.Split(p, ":")
			if parts[len(parts)-1] == port {
				if len(parts) == 3 {
					return parts[0], true
				}
				return "", true
			}
		}
		return "", false
	}
	if _, ok := find(cfg.Server.Listen); !ok {
		t.Errorf("ports %v do not publish server.listen %s", published, cfg.Server.Listen)
	}
	if ip, ok := find(cfg.Admin.Listen); !ok || ip != "127.0.0.1" {
		t.Errorf("ports %v do not publish admin.listen %s on 127.0.0.1 alone", published, cfg.Admin.Listen)
	}
}

// checkComposeNames checks that the Redis addresses and the upstreams are
// services of the file.
func checkComposeNames(t *testing.T, f *composeFile, cfg *config.Config) {
	t.Helper()
	if cfg.Store.Type != "redis" {
		t.Errorf("the store is %q: the Compose files exist to show sluice on Redis", cfg.Store.Type)
	}
	for _, a := range cfg.Store.Redis.Addrs {
		host, _, err := net.SplitHostPort(a)
		if _, ok := f.Services[host]; err != nil || !ok {
			t.Errorf("store.redis.addrs: %s is not a service of the file", a)
		}
	}
	for _, r := range cfg.Routes {
		if r.Upstream == "" {
			continue
		}
		u, err := url.Parse(r.Upstream)
		if _, ok := f.Services[u.Hostname()]; err != nil || !ok {
			t.Errorf("route %s: upstream %s is not a service of the file", r.ID, r.Upstream)
		}
	}
}

// checkComposePassword checks that every Redis process requires the
// password sluice is given, and that the sentinels monitor the master
// sluice asks for.
func checkComposePassword(t *testing.T, f *composeFile, password string, cfg *config.Config) {
	t.Helper()
	if password == "" || cfg.Store.Redis.Password != password {
		t.Errorf("store.redis.password is %q; the service's REDIS_PASSWORD is %q", cfg.Store.Redis.Password, password)
	}
	redises := 0
	for name, s := range f.Services {
		if !strings.HasPrefix(s.Image, "redis:") {
			continue
		}
		redises++
		cmd := strings.Join(s.Command, " ")
		if i := slices.Index(s.Command, "--requirepass"); i >= 0 {
			if s.Command[i+1] != password {
				t.Errorf("service %s requires password %q, sluice sends %q", name, s.Command[i+1], password)
			}
			continue
		}
		// A sentinel: its config is written by its command.
		for _, want := range []string{
			"requirepass " + password + "\n",
			"sentinel monitor " + cfg.Store.Redis.MasterName + " ",
			"sentinel auth-pass " + cfg.Store.Redis.MasterName + " " + password + "\n",
		} {
			if cfg.Store.Redis.Mode != "sentinel" || !strings.Contains(cmd, want) {
				t.Errorf("service %s: its command has no %q", name, want)
			}
		}
		if cfg.Store.Redis.SentinelPassword != password {
			t.Errorf("store.redis.sentinel_password is %q; the sentinels require %q", cfg.Store.Redis.SentinelPassword, password)
		}
	}
	if redises == 0 {
		t.Error("no Redis service")
	}
}
