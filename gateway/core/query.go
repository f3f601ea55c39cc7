package core

import "errors"

// Why a query string does not parse, as url.ParseQuery would refuse it.
var (
	errQuerySemicolon = errors.New("a semicolon is not a parameter separator (use &)")
	errQueryEscape    = errors.New("a % is not followed by two hexadecimal digits")
)

// checkQuery reports whether raw, a request's query string, parses as
// url.ParseQuery parses it, without building the parameters: a request
// without a query pays nothing, one with a query a scan of its bytes.
// httputil.ReverseProxy silently drops the parameters that do not parse
// before forwarding, and a query key would see them as absent, so the
// gateway answers 400 instead of forwarding something else than was sent.
func checkQuery(raw string) error {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ';':
			return errQuerySemicolon
		case '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return errQueryEscape
			}
			i += 2
		}
	}
	return nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
