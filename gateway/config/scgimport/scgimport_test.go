package scgimport

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProperties(t *testing.T) {
	src := "# comment\n! another\na.b=1\nc.d : two words\ne\\:f=g\\=h\nlong = one \\\n    two\\\n three\nuni=\\u00e9\\t.\n#---\nsecond=yes\n"
	docs, err := parseProperties(src)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]property{
		{{"a.b", "1", 3}, {"c.d", "two words", 4}, {"e:f", "g=h", 5}, {"long", "one twothree", 6}, {"uni", "é\t.", 9}},
		{{"second", "yes", 11}},
	}
	if d := cmp.Diff(want, docs, cmp.AllowUnexported(property{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := parseProperties("bad=\\u12\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad escape: %v", err)
	}
}

func TestSplitPath(t *testing.T) {
	got := splitPath("spring.cloud.gateway.routes[0].filters[1].args[redis-rate-limiter.replenishRate]")
	want := []string{"spring", "cloud", "gateway", "routes", "#0", "filters", "#1", "args", "redis-rate-limiter.replenishRate"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestMatchProfiles(t *testing.T) {
	active := []string{"prod", "eu"}
	for expr, want := range map[string]bool{
		"prod": true, "dev": false, "dev,eu": true, "!prod": false, "!dev": true,
		"prod & eu": true, "prod & us": false, "dev | eu": true, "(dev | prod) & !us": true, "prod & (us | dev)": false,
	} {
		got, ok := matchProfiles(expr, active)
		if !ok || got != want {
			t.Errorf("matchProfiles(%q) = %v, %v; want %v", expr, got, ok, want)
		}
	}
	for _, bad := range []string{"(prod", "prod &", "&"} {
		if _, ok := matchProfiles(bad, active); ok {
			t.Errorf("matchProfiles(%q) read a malformed expression", bad)
		}
	}
}

func TestSluicePath(t *testing.T) {
	for in, want := range map[string]string{
		"/api/**": "/api/**", "/a/{id}/b": "/a/*/b", "/files/{*path}": "/files/**", "/x/": "/x", "/": "/", "api/*": "/api/*",
		"/a/**/b": "", "/a/{id:\\d+}": "", "/a/v*": "", "/a/?": "",
	} {
		got, ok := sluicePath(in)
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("sluicePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRewriteAsStrip(t *testing.T) {
	for _, tc := range []struct {
		re, rep string
		strip   int
		base    string
		ok      bool
	}{
		{"/red/?(?<segment>.*)", "/$\\{segment}", 1, "", true},
		{"^/api/v1/(?<rest>.*)$", "/${rest}", 2, "", true},
		{"/old/(?<p>.*)", "/new/${p}", 1, "/new", true},
		{"/old/(?<p>.*)", "/${p}/x", 0, "", false},
		{"/(?<p>[a-z]+)/x", "/${p}", 0, "", false},
	} {
		strip, base, ok := rewriteAsStrip(tc.re, tc.rep)
		if strip != tc.strip || base != tc.base || ok != tc.ok {
			t.Errorf("rewriteAsStrip(%q, %q) = %d, %q, %v", tc.re, tc.rep, strip, base, ok)
		}
	}
}

func TestPlaceholders(t *testing.T) {
	tr := &translator{root: newMap("f", 1)}
	tr.root.set("app", newMap("f", 1))
	tr.root.m["app"].set("host", &node{isScalar: true, scalar: "redis.internal"})
	for in, want := range map[string]string{
		"${app.host}": "redis.internal", "${REDIS_HOST:localhost}": "${REDIS_HOST:-localhost}",
		"${spring.redis.password}": "${SPRING_REDIS_PASSWORD}", "pa$$": "pa$$$$", "${x-y.z:}": "${XY_Z:-}",
	} {
		if got := tr.value(in); got != want {
			t.Errorf("value(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFileProfile: only <config name>-<profile> names are profile files;
// the names people give a gateway's file are not.
func TestFileProfile(t *testing.T) {
	for _, tc := range []struct {
		file  string
		names []string
		want  string
	}{
		{"application.yml", nil, ""},
		{"application-dev.yml", nil, "dev"},
		{"config/application-prod.yaml", nil, "prod"},
		{"application-dev-eu.properties", nil, "dev-eu"},
		{"Application-dev.YML", nil, ""},
		{"application-.yml", nil, ""},
		{"gateway-config.yml", nil, ""},
		{"my-gateway.yml", nil, ""},
		{"api-gateway.yaml", nil, ""},
		{"spring-cloud-gateway.properties", nil, ""},
		{"/etc/my-app/application.yml", nil, ""},
		{"bootstrap-dev.yml", nil, ""},
		{"gateway.yml", []string{"gateway"}, ""},
		{"gateway-prod.yml", []string{"gateway"}, "prod"},
		{"application-prod.yml", []string{"gateway"}, ""},
		{"my-gateway-dev.yml", []string{"my-gateway"}, "dev"},
		{"app-x-dev.yml", []string{"app", "app-x"}, "dev"},
	} {
		names := tc.names
		if names == nil {
			names = []string{"application"}
		}
		if got := fileProfile(tc.file, names); got != tc.want {
			t.Errorf("fileProfile(%q, %q) = %q, want %q", tc.file, names, got, tc.want)
		}
	}
}

// TestParseSCGVersion: SCG 4.2.0 (from milestone 4.2.0-M2) is the first
// whose rate limiter keys name the route.
func TestParseSCGVersion(t *testing.T) {
	for v, legacy := range map[string]bool{
		"": false, "2.2.10": true, "3.1.8": true, "4.0.0": true, "4.1": true, "4.1.9": true, "v4.1.5": true,
		"4.2.0-M1": true, "4.2.0-M2": false, "4.2.0-RC1": false, "4.2": false, "4.2.0": false, "4.2.7": false,
		"4.3.0": false, "5.0.1": false, "4.1.0.RELEASE": true, "2023.0.3": true, "2024.0": false, "2025.0.0": false,
	} {
		got, err := ParseSCGVersion(v)
		if err != nil || got != legacy {
			t.Errorf("ParseSCGVersion(%q) = %v, %v; want %v", v, got, err, legacy)
		}
	}
	for _, bad := range []string{"4", "latest", "4.x", "Hoxton.SR12"} {
		if _, err := ParseSCGVersion(bad); err == nil {
			t.Errorf("ParseSCGVersion(%q) accepted", bad)
		}
	}
}

// TestLoadBalancedURI: a route whose uri is lb://NAME becomes a route
// with a pool whose one target is the placeholder ${LB_NAME} (its base
// path appended), with a FILE:LINE note at the uri's line, in YAML and
// .properties alike.
func TestLoadBalancedURI(t *testing.T) {
	for _, tc := range []struct {
		name, file, src string
		// want are lines of the configuration, in order.
		want []string
		// notes are FILE:LINE prefixes and the variable each names.
		notes [][2]string
	}{
		{
			name: "yaml",
			file: "application.yml",
			src: `spring:
  cloud:
    gateway:
      routes:
      - id: orders
        uri: lb://orders-service
        predicates:
        - Path=/orders/**
        filters:
        - PrefixPath=/v2
      - id: static
        uri: http://static:8080
      - id: odd
        uri: lb://Odd.Name-1:9000
`,
			want: []string{
				`  - id: "orders"`,
				`    # lb://orders-service: sluice has no service discovery; list the service's instances as targets, or set LB_ORDERS_SERVICE`,
				`    pool:`,
				`      balance: round_robin`,
				`      targets: ["${LB_ORDERS_SERVICE}/v2"]`,
				`  - id: "static"`,
				`    upstream: "http://static:8080"`,
				`  - id: "odd"`,
				`      targets: ["${LB_ODD_NAME_1}"]`,
			},
			notes: [][2]string{{"application.yml:6:", "LB_ORDERS_SERVICE"}, {"application.yml:14:", "LB_ODD_NAME_1"}},
		},
		{
			name: "properties",
			file: "application.properties",
			src: `# a comment
spring.cloud.gateway.routes[0].id=users
spring.cloud.gateway.routes[0].predicates[0]=Path=/users/**
spring.cloud.gateway.routes[0].uri=lb://users
spring.cloud.gateway.routes[1].id=pay
spring.cloud.gateway.routes[1].uri=lb://pay_svc
`,
			want: []string{
				`  - id: "users"`,
				`      targets: ["${LB_USERS}"]`,
				`  - id: "pay"`,
				`      targets: ["${LB_PAY_SVC}"]`,
			},
			notes: [][2]string{{"application.properties:4:", "LB_USERS"}, {"application.properties:6:", "LB_PAY_SVC"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Translate([]File{{Name: tc.file, Data: []byte(tc.src)}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rest := res.Config
			for _, line := range tc.want {
				i := strings.Index(rest, "\n"+line+"\n")
				if i < 0 {
					t.Fatalf("no line %q in order in:\n%s", line, res.Config)
				}
				rest = rest[i+len(line)+1:]
			}
			if res.Complete() {
				t.Error("a translation with lb:// placeholders is complete")
			}
			var lb []string
			for _, n := range res.Notes {
				if s := n.String(); strings.Contains(s, "lb://") {
					lb = append(lb, s)
				}
			}
			if len(lb) != len(tc.notes) {
				t.Fatalf("lb notes %q, want %d", lb, len(tc.notes))
			}
			for i, want := range tc.notes {
				if !strings.HasPrefix(lb[i], want[0]+" not translated: ") || !strings.Contains(lb[i], "${"+want[1]+"}") || !strings.Contains(lb[i], "set "+want[1]) {
					t.Errorf("note %q, want at %s naming %s", lb[i], want[0], want[1])
				}
			}
		})
	}
}
