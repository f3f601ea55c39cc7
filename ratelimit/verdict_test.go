package ratelimit

import "testing"

func TestVerdictOf(t *testing.T) {
	tests := []struct {
		shadow, allowed bool
		want            Verdict
	}{
		{false, true, Allowed},
		{true, true, Allowed},
		{false, false, Denied},
		{true, false, ShadowDenied},
	}
	for _, tt := range tests {
		req, d := Request{Shadow: tt.shadow}, Decision{Allowed: tt.allowed}
		if got := VerdictOf(req, d); got != tt.want {
			t.Errorf("VerdictOf(shadow %v, allowed %v) = %s, want %s", tt.shadow, tt.allowed, got, tt.want)
		}
	}
}
