package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// Failed admin logins are limited per client address with sluice's own
// token bucket: adminLoginBurst wrong tokens at once, then one more every
// adminLoginRefill. See docs/operations.md, "The admin listener".
const (
	adminLoginBurst  = 10
	adminLoginRefill = 6 * time.Second
	// adminLoginKeys bounds the addresses tracked at once; past it, new
	// addresses share one budget (the memory store's overflow).
	adminLoginKeys = 4096
)

// Logins limits failed admin logins per client address. It is safe for
// concurrent use, and it is handed from a gateway to the one that replaces
// it on reload (TakeOver), so a reload forgives no failure.
type Logins struct {
	store   *memory.Store
	limiter *ratelimit.Limiter
	handed  atomic.Bool // taken over by the next gateway: do not close
}

// NewLogins returns a login limiter on clock (nil: the system clock).
func NewLogins(clock ratelimit.Clock) (*Logins, error) {
	st, err := memory.New(memory.Options{Clock: clock, Shards: 16, MaxKeys: adminLoginKeys})
	if err != nil {
		return nil, err
	}
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Name: "admin-login", Algorithm: ratelimit.TokenBucket,
		Capacity: adminLoginBurst, Rate: float64(time.Second) / float64(adminLoginRefill)})
	if err != nil {
		st.Close()
		return nil, err
	}
	l, err := ratelimit.NewLimiter(p, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Logins{store: st, limiter: l}, nil
}

// TakeOver returns lg for the gateway that replaces the one holding it:
// the old one's Close then leaves it running.
func (lg *Logins) TakeOver() *Logins {
	lg.handed.Store(true)
	return lg
}

// Close stops the limiter unless a newer gateway took it over.
func (lg *Logins) Close() {
	if !lg.handed.Load() {
		lg.store.Close()
	}
}

// loginKey is the budget of r's peer: its address, or its /64 for IPv6,
// where one host commonly holds a whole /64. The admin listener trusts no
// proxy header.
func loginKey(r *http.Request) string {
	addr, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	ip := addr.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// admit checks the token of a request to /admin/. It reports whether to
// serve r; when not, it has answered: 401 with a challenge for a missing or
// wrong token, or 429 with Retry-After while r's address has no failures
// left, whatever token it sends. Only a request that presents credentials
// and fails counts against its address.
func (lg *Logins) admit(w http.ResponseWriter, r *http.Request, token string) bool {
	ctx, key := r.Context(), loginKey(r)
	if d, err := lg.limiter.Peek(ctx, key); err == nil && !d.Allowed {
		tooManyLogins(w, d.RetryAfter)
		return false
	}
	given, presented := credentials(r)
	if presented && tokenEqual(given, token) {
		return true
	}
	if presented {
		if d, err := lg.limiter.Allow(context.WithoutCancel(ctx), key); err == nil && !d.Allowed {
			tooManyLogins(w, d.RetryAfter)
			return false
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="sluice"`)
	httplimit.WriteProblem(w, http.StatusUnauthorized, "A valid admin token is required.")
	return false
}

func tooManyLogins(w http.ResponseWriter, retry time.Duration) {
	secs := max(1, int64((retry+time.Second-1)/time.Second))
	unit := " seconds."
	if secs == 1 {
		unit = " second."
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	httplimit.WriteProblem(w, http.StatusTooManyRequests,
		"Too many failed admin logins from this address. Please retry after "+strconv.FormatInt(secs, 10)+unit)
}

// credentials returns the token r carries as a Bearer token or as the
// password of HTTP Basic auth (docs/operations.md, "The admin listener"), and
// whether it carries one. The scheme is case-insensitive (RFC 9110 §11.1):
// "bearer tok" is accepted, as r.BasicAuth already accepts "basic ...".
func credentials(r *http.Request) (string, bool) {
	scheme, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") {
		given := strings.TrimLeft(rest, " ") // credentials follow 1*SP
		return given, given != ""
	}
	if _, pw, ok := r.BasicAuth(); ok {
		return pw, pw != ""
	}
	return "", r.Header.Get("Authorization") != ""
}

// tokenEqual compares in constant time, on SHA-256 digests so that neither
// the time taken nor its dependence on where the bytes differ reveals the
// configured token's length.
func tokenEqual(given, token string) bool {
	a, b := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
