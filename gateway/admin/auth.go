package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Failed admin logins are limited per client address: adminLoginBurst
// wrong tokens at once, then one more every adminLoginRefill. See
// docs/operations.md, "The admin listener".
const (
	adminLoginBurst  = 10
	adminLoginRefill = 6 * time.Second
	// adminLoginKeys bounds the addresses with failures tracked at once;
	// past it, failures from new addresses share one overflow budget.
	adminLoginKeys = 4096
)

// Logins limits failed admin logins per client address. It is safe for
// concurrent use, and it is handed from a gateway to the one that replaces
// it on reload (TakeOver), so a reload forgives no failure.
//
// Each budget is a GCRA: the time at which all its failures are forgiven.
// Only failures create or advance one; an address whose failures are all
// forgiven holds no entry.
type Logins struct {
	clock ratelimit.Clock
	mu    sync.Mutex
	// owed holds each address's forgiven-at time; at most adminLoginKeys.
	owed map[string]time.Time
	// shared is the overflow budget of the addresses owed had no room
	// for. It counts and refuses their failures only, never the right
	// token, so that the addresses sharing it cannot lock one another out.
	shared time.Time
	swept  time.Time // last removal of forgiven entries from a full owed
}

// NewLogins returns a login limiter on clock (nil: the system clock).
func NewLogins(clock ratelimit.Clock) *Logins {
	if clock == nil {
		clock = ratelimit.SystemClock{}
	}
	return &Logins{clock: clock, owed: make(map[string]time.Time)}
}

// TakeOver returns lg for the gateway that replaces the one holding it.
func (lg *Logins) TakeOver() *Logins { return lg }

// loginsSpan is the time a full budget of failures takes to be forgiven.
const loginsSpan = adminLoginBurst * adminLoginRefill

// locked returns how long a budget forgiven at tat refuses a failure at
// now: zero when it takes one more.
func locked(tat, now time.Time) time.Duration {
	if !tat.After(now) { // also a zero tat, whose Sub would saturate
		return 0
	}
	return max(0, tat.Sub(now)-(loginsSpan-adminLoginRefill))
}

// charge counts a failure at now against a budget forgiven at *tat; it
// returns how long the budget refuses it (zero: counted).
func charge(tat *time.Time, now time.Time) time.Duration {
	if d := locked(*tat, now); d > 0 {
		return d
	}
	*tat = later(*tat, now).Add(adminLoginRefill)
	return 0
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// check decides a request to /admin/ from address key at now that
// presented a wrong token (failed) or not; it returns how long the request
// is refused (429), or zero. An address with a budget of its own that it
// has used up is refused whatever it sends. Otherwise only a failure is
// counted, and refused when its budget (its own, or the overflow budget
// when the table is full) has none left.
func (lg *Logins) check(key string, now time.Time, failed bool) time.Duration {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	tat, own := lg.owed[key]
	if own {
		if d := locked(tat, now); d > 0 || !failed {
			return d
		}
	}
	if !failed {
		return 0
	}
	if !own && len(lg.owed) >= adminLoginKeys {
		lg.sweep(now)
	}
	if !own && len(lg.owed) >= adminLoginKeys {
		return charge(&lg.shared, now)
	}
	d := charge(&tat, now)
	lg.owed[key] = tat
	return d
}

// sweep drops the addresses whose failures are all forgiven, at most once
// a second, so that a full table costs a failure one scan a second.
func (lg *Logins) sweep(now time.Time) {
	if now.Sub(lg.swept) < time.Second {
		return
	}
	lg.swept = now
	for k, tat := range lg.owed {
		if !tat.After(now) {
			delete(lg.owed, k)
		}
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
// left of its own, whatever token it sends, or while a wrong token finds
// its budget used up. Only a request that presents credentials and fails
// counts against its address. The token is compared first (in constant
// time), so that an address the table has no room for is refused only
// its failures.
func (lg *Logins) admit(w http.ResponseWriter, r *http.Request, token string) bool {
	given, presented := credentials(r)
	right := presented && tokenEqual(given, token)
	if d := lg.check(loginKey(r), lg.clock.Now(), presented && !right); d > 0 {
		tooManyLogins(w, d)
		return false
	}
	if right {
		return true
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
