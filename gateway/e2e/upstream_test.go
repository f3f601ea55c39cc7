package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// upstream is an httptest backend that counts what reaches it.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
}

// newUpstream answers "upstream <path>", or with ?sleep=DURATION after that
// long, and with the SHA-256 and length of the body for POST /hash.
func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Path == "/hash" {
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			w.Header().Set("X-Length", itoa(n))
			w.Write([]byte(hex.EncodeToString(h.Sum(nil))))
			return
		}
		w.Write([]byte("upstream " + r.URL.Path))
	}))
	t.Cleanup(u.Close)
	return u
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}
