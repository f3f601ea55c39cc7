package keysource

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-gw/sluice/httplimit"
)

func init() { Register("cookie:NAME", parseCookie) }

// parseCookie parses the argument of "cookie:NAME": the name of a cookie,
// an RFC 6265 token, case-sensitive. The part's value is that cookie's
// value in the request (Cookie).
func parseCookie(name string) (httplimit.KeyPart, error) {
	switch {
	case name == "":
		return httplimit.KeyPart{}, fmt.Errorf("cookie name is empty")
	case !httplimit.ValidHeaderName(name): // a cookie name is the same token
		return httplimit.KeyPart{}, fmt.Errorf("cookie name %q is not a valid cookie name (an RFC 6265 token)", name)
	}
	return httplimit.FuncKeyPart("cookie:"+name, func(r httplimit.Request) string { return cookie(r, name) }), nil
}

// cookie returns the value of the first cookie named name that r's Cookie
// header fields carry, "" if none. Several Cookie fields are joined with
// "; " into one, as RFC 9113 §8.2.3 has an HTTP/2 server do, and read as
// net/http's Request.Cookie reads them: a pair that does not parse (no
// name, an invalid name or value) is skipped, and a quoted value is
// unquoted.
func cookie(r httplimit.Request, name string) string {
	lines := r.HeaderValues("Cookie")
	switch len(lines) {
	case 0:
		return ""
	case 1:
	default:
		lines = []string{strings.Join(lines, "; ")}
	}
	c, err := (&http.Request{Header: http.Header{"Cookie": lines}}).Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}
