package core

import "github.com/sluice-gw/sluice/httplimit"

// hasQueryValue reports whether the raw query string holds parameter name
// with value want (decoded, as url.ParseQuery decodes), or at all when
// want is empty. Pairs that do not decode are skipped, as ParseQuery
// skips them.
func hasQueryValue(raw, name, want string) bool {
	for v := range httplimit.QueryValues(raw, name) {
		if want == "" || v == want {
			return true
		}
	}
	return false
}
