package httpengine

import (
	"testing"
	"time"
)

func TestGRPCTimeoutFormat(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1n", time.Nanosecond, true},
		{"250m", 250 * time.Millisecond, true},
		{"99999999u", 99999999 * time.Microsecond, true},
		{"3S", 3 * time.Second, true},
		{"2M", 2 * time.Minute, true},
		{"1H", time.Hour, true},
		{"99999999H", 1<<63 - 1, true}, // past time.Duration: no bound in practice
		{"123456789m", 0, false},       // 9 digits
		{"m", 0, false},
		{"10", 0, false},
		{"10s", 0, false},
		{"-1S", 0, false},
		{"+1S", 0, false},
		{" 1S", 0, false},
		{"", 0, false},
	} {
		got, ok := parseGRPCTimeout(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseGRPCTimeout(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	for d, want := range map[time.Duration]string{
		-time.Second:                      "1n",
		0:                                 "1n",
		500 * time.Nanosecond:             "500n",
		300 * time.Millisecond:            "300000u",
		30 * time.Second:                  "30000000u",
		299*time.Second + time.Nanosecond: "299000m",
		48 * time.Hour:                    "172800S",
	} {
		got := formatGRPCTimeout(d)
		if got != want {
			t.Errorf("formatGRPCTimeout(%v) = %q, want %q", d, got, want)
		}
		back, ok := parseGRPCTimeout(got)
		if !ok || d > 0 && (back > d || d-back > d/1000000) {
			t.Errorf("formatGRPCTimeout(%v) = %q, read back as %v", d, got, back)
		}
	}
}

func TestEncodeGRPCMessage(t *testing.T) {
	for in, want := range map[string]string{
		"No route matches this request.": "No route matches this request.",
		"100% sure":                      "100%25 sure",
		"line\nbreak":                    "line%0Abreak",
		"café":                           "caf%C3%A9",
		"":                               "",
	} {
		if got := encodeGRPCMessage(in); got != want {
			t.Errorf("encodeGRPCMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
