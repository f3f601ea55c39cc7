package gateway

import (
	"net/url"
	"strings"
)

// hasQueryValue reports whether the raw query string holds parameter name
// with value want (decoded, as url.ParseQuery decodes), or at all when
// want is empty. Pairs that do not decode are skipped, as ParseQuery
// skips them.
func hasQueryValue(raw, name, want string) bool {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				continue
			}
		}
		if k != name {
			continue
		}
		if want == "" {
			return true
		}
		if strings.ContainsAny(v, "%+") {
			var err error
			if v, err = url.QueryUnescape(v); err != nil {
				continue
			}
		}
		if v == want {
			return true
		}
	}
	return false
}
