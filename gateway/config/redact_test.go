package config

import (
	"strings"
	"testing"
)

func TestRedactAddress(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"http://127.0.0.1:8081/base", "http://127.0.0.1:8081/base"},
		{"http://user:pw@127.0.0.1:8081/base", "http://user:xxxxx@127.0.0.1:8081/base"},
		{"http://user:p@w@h/x", "http://user:xxxxx@h/x"},
		{"redis://:pw@h:6379", "redis://:xxxxx@h:6379"},
		{"redis://token@h:6379", "redis://xxxxx@h:6379"},
		{"user:pw@h:6379", "user:xxxxx@h:6379"},
		{"pw@h:6379", "xxxxx@h:6379"},
		{"http://h/users/@me", "http://h/users/@me"},
		{"http://u:pw@h/%zz", "http://u:xxxxx@h/%zz"},
		{"127.0.0.1:6379", "127.0.0.1:6379"},
	} {
		if got := RedactAddress(tt.in); got != tt.want {
			t.Errorf("RedactAddress(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCheckNeverRepeatsPasswords: no message about an address (an upstream, a
// Redis address) repeats a password it carries.
func TestCheckNeverRepeatsPasswords(t *testing.T) {
	data := []byte(`
store:
  type: redis
  redis:
    addrs: ["redis://:S3CRET-a@127.0.0.1:6379", "user:S3CRET-b@127.0.0.1:6379", "S3CRET-c@127.0.0.1:6379"]
    mode: cluster
routes:
  - {id: a, match: {path: /a}, upstream: "http://user:S3CRET-d@127.0.0.1:8081"}
  - {id: b, match: {path: /b}, upstream: "http://user:S3CRET-e@127.0.0.1:8081/%zz"}
  - {id: c, match: {path: /c}, upstream: "ftp://user:S3CRET-f@127.0.0.1/files"}
  - {id: d, match: {path: /d}, upstream: "user:S3CRET-g@127.0.0.1:8081"}
`)
	got, valid := checkOutput(t, "sluice.yaml", data)
	if valid {
		t.Fatal("addresses with credentials are accepted")
	}
	if strings.Contains(got, "S3CRET") {
		t.Errorf("a message repeats a password:\n%s", got)
	}
	if n := strings.Count(got, "\n"); n != 7 {
		t.Errorf("%d messages, want one per address (7):\n%s", n, got)
	}
}
