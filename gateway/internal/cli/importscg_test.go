package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
)

// TestImportSCGGolden translates each Spring Cloud Gateway configuration
// under testdata/importscg/<case>/ (the files and flags listed in its
// `args`, one per line; a name ending in .yml, .yaml or .properties is a
// file of the case) and compares the exit status, stdout and stderr
// with its want.golden; the translated configuration must pass what
// `sluice check` checks. Regenerate with:
//
//	go test ./gateway/internal/cli -run TestImportSCGGolden -update
func TestImportSCGGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/importscg/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("%d import cases, want at least 10", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "args"))
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"import", "scg"}
			for _, a := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				if a = strings.TrimSpace(a); a == "" {
					continue
				}
				switch filepath.Ext(a) {
				case ".yml", ".yaml", ".properties":
					a = filepath.Join(dir, a)
				}
				args = append(args, a)
			}
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr})
			got := fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", code, stdout.String(), stderr.String())
			golden := filepath.Join(dir, "want.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("import mismatch (-want +got):\n%s", d)
			}
			if code != exitOK && code != exitPartial {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			checkTranslated(t, stdout.Bytes())
		})
	}
}

// checkTranslated runs what `sluice check` runs on a translated
// configuration, with every environment variable it names set: an LB_
// placeholder of an lb:// service to a URL, any other to "secret".
func checkTranslated(t *testing.T, data []byte) *config.Config {
	t.Helper()
	lookup := func(name string) (string, bool) {
		if strings.HasPrefix(name, "LB_") {
			return "http://127.0.0.1:8080", true
		}
		return "secret", true
	}
	cfg, err := config.Parse("translated.yaml", data, lookup)
	if err != nil {
		t.Fatalf("sluice check refuses the translation:\n%v\n%s", err, data)
	}
	g, err := gateway.New(cfg, gateway.Deps{})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	g.Close()
	return cfg
}

func TestImportSCGUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		in   string
	}{
		{[]string{"import"}, exitUsage, "the one source is scg"},
		{[]string{"import", "nginx"}, exitUsage, "the one source is scg"},
		{[]string{"import", "scg"}, exitUsage, "no FILE given"},
		{[]string{"import", "scg", "--key-resolver", "nobean", "x.yml"}, exitUsage, "want BEAN=KEY"},
		{[]string{"import", "scg", "--key-resolver", "b=header:", "x.yml"}, exitUsage, "--key-resolver"},
		{[]string{"import", "scg", "--bogus", "x.yml"}, exitUsage, "not defined"},
		{[]string{"import", "scg", "--scg-version", "latest", "x.yml"}, exitUsage, "--scg-version \"latest\""},
		{[]string{"import", "scg", "testdata/importscg/does-not-exist.yml"}, exitError, "no such file"},
		{[]string{"import", "scg", "testdata/importscg/seed/args"}, exitError, "not a .yml, .yaml or .properties file"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), tc.args, Env{Stdout: &stdout, Stderr: &stderr})
		if code != tc.code || !strings.Contains(stderr.String(), tc.in) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.in)
		}
	}
	var stdout bytes.Buffer
	if code := Run(context.Background(), []string{"import", "scg", "-h"}, Env{Stdout: &stdout, Stderr: &stdout}); code != exitOK || !strings.Contains(stdout.String(), "--key-resolver") {
		t.Errorf("import scg -h: exit %d, %q", code, stdout.String())
	}
}

// TestImportSCGFileNames imports one SCG file under the names people give
// it: every name that is not <config name>-<profile> is read in full; a
// profile file of a profile that is not active is left out, and the
// message names the flag that reads it.
func TestImportSCGFileNames(t *testing.T) {
	const scg = `spring:
  cloud:
    gateway:
      routes:
      - id: orders
        uri: http://orders:8080
        predicates: [Path=/orders/**]
        filters:
        - name: RequestRateLimiter
          args: {key-resolver: "#{@ipKeyResolver}", redis-rate-limiter.replenishRate: 5, redis-rate-limiter.burstCapacity: 10}
`
	run := func(t *testing.T, name string, flags ...string) (int, string, string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(file, []byte(scg), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), append(append([]string{"import", "scg"}, flags...), file), Env{Stdout: &stdout, Stderr: &stderr})
		return code, stdout.String(), stderr.String()
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"application.yml", nil},
		{"gateway-config.yml", nil},
		{"my-gateway.yml", nil},
		{"api-gateway.yaml", nil},
		{"spring-cloud-gateway.yml", nil},
		{"gateway-routes.yml", nil},
		{"bootstrap-dev.yml", nil},
		{"application-dev.yml", []string{"--profile", "dev"}},
		{"gateway-prod.yml", []string{"--config-name", "gateway", "--profile", "prod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.name, tc.flags...)
			if code != exitOK || !strings.Contains(out, `id: "orders"`) {
				t.Fatalf("exit %d, want 0 and route orders; stdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			checkTranslated(t, []byte(out))
		})
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"application-dev.yml", nil, "--profile dev"},
		{"application-local.yaml", []string{"--profile", "prod"}, "--profile local"},
		{"gateway-prod.yml", []string{"--config-name", "gateway"}, "--profile prod"},
	} {
		t.Run("inactive/"+tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.name, tc.flags...)
			if code != exitPartial || strings.Contains(out, `id: "orders"`) {
				t.Fatalf("exit %d, want 3 and no route; stdout:\n%s", code, out)
			}
			if !strings.Contains(errOut, "no spring.cloud.gateway routes found") || !strings.Contains(errOut, tc.name+" is a file of profile") || !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr does not name %s and %q:\n%s", tc.name, tc.want, errOut)
			}
		})
	}
}

// TestImportSCGLoadBalancedCheck: a translation with lb:// services is
// refused by `sluice check` while its LB_ placeholders are not set, with
// a message naming the variable at the pool's target, and accepted once
// they are.
func TestImportSCGLoadBalancedCheck(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"import", "scg", "testdata/importscg/lb-pool/application.yml"}, Env{Stdout: &out, Stderr: &errOut})
	if code != exitPartial {
		t.Fatalf("import: exit %d, %s", code, errOut.String())
	}
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	lookup := func(name string) (string, bool) { v, ok := set[name]; return v, ok }
	var stdout, stderr bytes.Buffer
	code = Run(context.Background(), []string{"check", "--config", path}, Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: lookup})
	msg := stdout.String() + stderr.String()
	if code != exitError || !strings.Contains(msg, "pool.targets[0]") || !strings.Contains(msg, `"LB_ORDERS_SERVICE" is not set`) || !strings.Contains(msg, `"LB_CATALOG_SERVICE" is not set`) {
		t.Fatalf("check without the placeholders set: exit %d, %s", code, msg)
	}
	set["LB_ORDERS_SERVICE"] = "http://10.0.0.11:8080"
	set["LB_CATALOG_SERVICE"] = "https://catalog.internal:8443"
	stdout.Reset()
	stderr.Reset()
	if code := Run(context.Background(), []string{"check", "--config", path}, Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: lookup}); code != exitOK {
		t.Fatalf("check with the placeholders set: exit %d, %s%s", code, stdout.String(), stderr.String())
	}
}
