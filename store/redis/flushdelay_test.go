package redis

import (
	"testing"
	"time"
)

// TestMaxFlushDelay: New passes the flush delay to the client, defaulting
// to DefaultMaxFlushDelay, and a negative value disables it.
func TestMaxFlushDelay(t *testing.T) {
	for _, tc := range []struct {
		opt, want time.Duration
	}{
		{0, DefaultMaxFlushDelay},
		{-1, 0},
		{5 * time.Microsecond, 5 * time.Microsecond},
	} {
		s, err := New(Options{MaxFlushDelay: tc.opt})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.copt.MaxFlushDelay; got != tc.want {
			t.Errorf("MaxFlushDelay %v: client option %v, want %v", tc.opt, got, tc.want)
		}
		s.Close()
	}
}
