package redis

import "testing"

// TestShortReply: shortReply inverts core.lua's short integer
// -1 - (remaining·2^33 + reset) over its whole range.
func TestShortReply(t *testing.T) {
	for _, c := range []struct{ remaining, reset int64 }{
		{0, 0}, {0, 1}, {1, 0}, {99, 100000}, {1<<20 - 1, 1<<33 - 1}, {12345, 1 << 32},
	} {
		v := -1 - (c.remaining<<33 + c.reset)
		got := shortReply(v)
		if !got.allowed || got.remaining != c.remaining || got.reset != c.reset || got.retry != 0 || got.delay != 0 || got.next != 0 {
			t.Errorf("shortReply(%d) = %+v, want allowed, remaining %d, reset %d", v, got, c.remaining, c.reset)
		}
	}
}
