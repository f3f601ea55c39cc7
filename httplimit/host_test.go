package httplimit

import (
	"net/http/httptest"
	"testing"
)

func TestNormalizeHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM", "api.example.com"},
		{"api.example.com:8080", "api.example.com"},
		{"api.example.com.", "api.example.com"},
		{"API.example.com.:443", "api.example.com"},
		{"api.example.com..", "api.example.com."},
		{"[::1]:8080", "::1"},
		{"[::1]", "::1"},
		{"127.0.0.1:80", "127.0.0.1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := NormalizeHost(tt.in); got != tt.want {
			t.Errorf("NormalizeHost(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestHeaderHostKey: "header:Host" reads the request's host, which Go keeps
// in Request.Host and not in the header map, normalised so that
// case, port and a trailing dot are not fresh budgets.
func TestHeaderHostKey(t *testing.T) {
	p, err := ParseKey("header:host")
	if err != nil {
		t.Fatal(err)
	}
	rv := &resolver{}
	for _, host := range []string{"api.example.com", "API.example.com.", "api.example.com:8443"} {
		r := httptest.NewRequest("GET", "http://"+host+"/x", nil)
		if got := rv.value(&p, HTTPRequest(r)); got != "api.example.com" {
			t.Errorf("value(header:Host) for Host %q = %q, want %q", host, got, "api.example.com")
		}
	}
}
