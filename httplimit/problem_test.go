package httplimit

import (
	"encoding/json"
	"net/http/httptest"
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
		w := httptest.NewRecorder()
		WriteTooManyRequests(w, tt.retry, []string{"p"})
		var body struct{ Detail, Message string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Detail != tt.want || body.Message != tt.want {
			t.Errorf("WriteTooManyRequests(%v): detail %q, message %q, want %q", tt.retry, body.Detail, body.Message, tt.want)
		}
	}
}
