package keysource

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/httplimit"
)

// builtinForms is httplimit's key syntax, first in every list.
const builtinForms = "header:NAME | query:NAME | ip | route | path | const:TEXT"

// allForms is every form registered in this test binary: httplimit's,
// cookie.go's, tlscert.go's and this file's test-tenant.
const allForms = builtinForms + " | cookie:NAME | client_cert:FIELD | test-tenant:ID"

// test-tenant is a registered kind whose value is the header
// X-Tenant-<ID>; "test-tenant:bad" makes its Parser return an invalid part.
func init() {
	Register("test-tenant:ID", func(arg string) (httplimit.KeyPart, error) {
		if arg == "bad" {
			return httplimit.KeyPart{}, nil
		}
		return httplimit.FuncKeyPart("test-tenant:"+arg, func(r httplimit.Request) string { return r.Header("X-Tenant-" + arg) }), nil
	})
}

// TestParseBuiltins: httplimit's own specs parse as httplimit.ParseKey
// parses them, messages included.
func TestParseBuiltins(t *testing.T) {
	for _, spec := range []string{
		"header:x-user-id", "header: X-Api-Key ", "query:user", "ip", "route", "path", "const:global", "const:a:b",
		"header:", "header:X User", "query:", "const: ", "header:Host",
	} {
		got, err := Parse(spec)
		want, wantErr := httplimit.ParseKey(spec)
		if got != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("Parse(%q) = %v, %v; httplimit.ParseKey gives %v, %v", spec, got, err, want, wantErr)
		}
		if err != nil && !errors.Is(err, httplimit.ErrInvalidKey) {
			t.Errorf("Parse(%q): error %v does not wrap ErrInvalidKey", spec, err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		spec, want, err string
	}{
		{spec: "cookie:session", want: "cookie:session"},
		{spec: "cookie: session ", want: "cookie:session"},
		{spec: "cookie:Session_ID.v2", want: "cookie:Session_ID.v2"},
		{spec: "cookie:", err: `key "cookie:": cookie name is empty`},
		{spec: "cookie:  ", err: `key "cookie:  ": cookie name is empty`},
		{spec: "cookie:a b", err: `key "cookie:a b": cookie name "a b" is not a valid cookie name (an RFC 6265 token)`},
		{spec: "cookie:a=b", err: `key "cookie:a=b": cookie name "a=b" is not a valid cookie name (an RFC 6265 token)`},
		{spec: "cookie", err: `unknown key "cookie" (allowed: ` + allForms + `)`},
		{spec: "Cookie:session", err: `unknown key "Cookie:session" (allowed: ` + allForms + `)`},
		{spec: "cookies:session", err: `unknown key "cookies:session" (allowed: ` + allForms + `)`},
		{spec: "IP", err: `unknown key "IP" (allowed: ` + allForms + `)`},
		{spec: "ip:x", err: `unknown key "ip:x" (allowed: ` + allForms + `)`},
		{spec: "", err: `unknown key "" (allowed: ` + allForms + `)`},
	} {
		kp, err := Parse(tt.spec)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Parse(%q) error %v, want %s", tt.spec, err, tt.err)
			}
			if !errors.Is(err, httplimit.ErrInvalidKey) {
				t.Errorf("Parse(%q): error %v does not wrap ErrInvalidKey", tt.spec, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.spec, err)
			continue
		}
		if kp.Source != httplimit.SourceFunc || kp.String() != tt.want {
			t.Errorf("Parse(%q) = %v (source %d), want %s", tt.spec, kp, kp.Source, tt.want)
		}
	}
}

func TestParseKey(t *testing.T) {
	k, err := ParseKey([]string{"cookie:session", "ip"})
	if err != nil || k.String() != "cookie:session,ip" {
		t.Errorf("ParseKey = %v, %v; want cookie:session,ip", k, err)
	}
	_, err = ParseKey([]string{"cookie:", "path", "nope"})
	want := "key \"cookie:\": cookie name is empty\nunknown key \"nope\" (allowed: " + allForms + ")"
	if err == nil || err.Error() != want || !errors.Is(err, httplimit.ErrInvalidKey) {
		t.Errorf("ParseKey of two bad specs: %v, want\n%s", err, want)
	}
	if _, err := ParseKey(nil); err == nil || err.Error() != "key list is empty (give one or more of "+allForms+")" {
		t.Errorf("ParseKey(nil): %v", err)
	}
}

// TestCookie: the value of "cookie:NAME" in requests.
func TestCookie(t *testing.T) {
	kp, err := Parse("cookie:session")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		cookies []string // Cookie header fields
		want    string
	}{
		{"present", []string{"session=abc123"}, "abc123"},
		{"among others", []string{"theme=dark; session=abc123; lang=en"}, "abc123"},
		{"absent", []string{"theme=dark; lang=en"}, ""},
		{"no Cookie field", nil, ""},
		{"empty value", []string{"session="}, ""},
		{"name is case-sensitive", []string{"Session=abc123"}, ""},
		{"several Cookie fields", []string{"theme=dark", "lang=en", "session=abc123"}, "abc123"},
		{"the first of several", []string{"session=first", "session=second"}, "first"},
		{"quoted", []string{`session="abc123"`}, "abc123"},
		{"a malformed pair beside it is skipped", []string{"garbage; tracking=a b,c; session=abc123"}, "abc123"},
		{"invalid value", []string{`session=ab"c`}, ""},
		{"invalid name before it", []string{"se ssion=x; session=abc123"}, "abc123"},
		{"blank field", []string{"", "session=abc123"}, "abc123"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			for _, c := range tt.cookies {
				r.Header.Add("Cookie", c)
			}
			req := httplimit.HTTPRequest(r)
			if got := cookie(req, "session"); got != tt.want {
				t.Errorf("cookie = %q, want %q", got, tt.want)
			}
			// Through the middleware: the key part's value is the cookie's.
			if got := valueOf(t, kp, req); got != tt.want {
				t.Errorf("key value %q, want %q", got, tt.want)
			}
		})
	}
}

// valueOf returns kp's value for r, as a limit keyed by kp sees it.
func valueOf(t *testing.T, kp httplimit.KeyPart, r httplimit.Request) string {
	t.Helper()
	m, err := httplimit.New(httplimit.Options{Store: nopStore{}, Limits: []httplimit.Limit{{Policy: policy, Key: httplimit.Key{kp}}}})
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := m.KeyOf(r, 0, nil)
	return strings.Join(parts, ",")
}

// TestRegister: a registered kind parses through its Parser, and
// registering a kind twice or a malformed one is refused.
func TestRegister(t *testing.T) {
	kp, err := Parse("test-tenant:A")
	if err != nil || kp.String() != "test-tenant:A" {
		t.Fatalf("Parse of a registered kind = %v, %v", kp, err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Tenant-A", " acme ")
	if got := valueOf(t, kp, httplimit.HTTPRequest(r)); got != "acme" {
		t.Errorf("value %q, want acme", got)
	}
	if _, err := Parse("test-tenant:bad"); err == nil || err.Error() != `key "test-tenant:bad": the test-tenant:ID source returned an invalid part` {
		t.Errorf("Parse of a Parser's invalid part: %v", err)
	}
	if Forms() != allForms {
		t.Errorf("Forms = %q, want %q", Forms(), allForms)
	}
	for _, form := range []string{"test-tenant:X", "ip", "cookie:N", "Upper:X", "9lives", "", "_ab", "a.b", "client_cert:X"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", form)
				}
			}()
			Register(form, parseCookie)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Register with a nil Parser did not panic")
			}
		}()
		Register("test-nil", nil)
	}()
	if Forms() != allForms {
		t.Errorf("after refused registrations, Forms = %q, want %q", Forms(), allForms)
	}
}
