package httplimit

import (
	"encoding/json"
	"testing"
	"time"
)

// TestTooManyRequestsWording: "1 second", never
// "1 seconds".
func TestTooManyRequestsWording(t *testing.T) {
	for _, tt := range []struct {
		retry time.Duration
		want  string
	}{
		{time.Millisecond, "Rate limit exceeded. Please retry after 1 second."},
		{time.Second, "Rate limit exceeded. Please retry after 1 second."},
		{1500 * time.Millisecond, "Rate limit exceeded. Please retry after 2 seconds."},
		{time.Minute, "Rate limit exceeded. Please retry after 60 seconds."},
	} {
		var body struct{ Detail, Message string }
		if err := json.Unmarshal(tooManyRequests(retryAfterSeconds(tt.retry), []string{"p"}).marshal(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Detail != tt.want || body.Message != tt.want {
			t.Errorf("429 body for %v: detail %q, message %q, want %q", tt.retry, body.Detail, body.Message, tt.want)
		}
	}
}
