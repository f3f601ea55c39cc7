package core

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-gw/sluice/gateway/config"
)

// oddPathModel is a naive model of the path rules (docs/operations.md):
// a path is refused when, fully decoded and split on "/" and "\", it has a
// "." or ".." segment or an empty one other than the last, or when its
// escaped form holds ";", or an encoded or literal slash or backslash, or
// when the decoded path holds a control character.
func oddPathModel(decoded, escaped string) bool {
	return oddSegmentsModel(decoded) || regexp.MustCompile(`(?i);|%2f|%5c|\\`).MatchString(escaped) ||
		regexp.MustCompile(`[\x00-\x1f\x7f]`).MatchString(decoded)
}

// oddSegmentsModel reports whether a decoded path split on "/" and "\" has
// a "." or ".." segment or an empty one other than the last.
func oddSegmentsModel(decoded string) bool {
	segs := regexp.MustCompile(`[/\\]`).Split(decoded, -1)
	for i, s := range segs {
		if s == "." || s == ".." || s == "" && i > 0 && i < len(segs)-1 {
			return true
		}
	}
	return false
}

// globModel is a naive model of a route path pattern (docs/operations.md,
// "Path rules"): a regular
// expression over the whole path where "*" is one non-empty segment without
// '/', "**" any number of segments (none included), and every other segment
// itself, byte for byte.
func globModel(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, seg := range splitPath(pattern) {
		switch seg {
		case "**":
			b.WriteString("(/[^/]*)*")
		case "*":
			b.WriteString("/[^/]+")
		default:
			b.WriteString("/" + regexp.QuoteMeta(seg))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// FuzzMatch checks route matching and prefix stripping on any pattern and
// path: matching never panics and agrees with a naive regular-expression
// model ("*" one non-empty segment, "**" any rest, other segments exact; a
// path the path rules refuse matches nothing); "/P/**" matches exactly /P
// and what lies below it; on a route with allow_encoded_slash, strip_prefix
// removes the segments the pattern matched; and strip_prefix keeps a tail
// of the request path. (That the path a proxy route forwards holds no dot
// or empty segment and stays below the upstream's base path is
// fastengine's FuzzForwardedPath.) Seeds: testdata/fuzz/FuzzMatch.
func FuzzMatch(f *testing.F) {
	f.Add("/api/**", "/api/v1/users", uint8(1))
	f.Add("/users/*/posts", "/users//posts", uint8(0))
	f.Add("/a/**/z", "/a/b/c/z", uint8(2))
	f.Add("/**", "/", uint8(9))
	f.Fuzz(func(t *testing.T, pattern, escaped string, strip uint8) {
		pattern = "/" + strings.TrimPrefix(pattern, "/")
		if !utf8.ValidString(pattern) {
			return // YAML, so a config, holds only UTF-8
		}
		if strings.Count(pattern, "**") > 2 || len(pattern) > 256 || len(escaped) > 512 {
			return // the matcher is O(len^k) in k = number of "**"; config allows one
		}
		p, err := url.PathUnescape(escaped)
		if err != nil || !strings.HasPrefix(escaped, "/") {
			return
		}
		r := &http.Request{Method: "GET", Host: "gw.test", URL: &url.URL{Path: p, RawPath: escaped}, Header: http.Header{}}
		got := matches(newMatcher(config.Match{Path: pattern}), r)
		odd := oddPathModel(p, escaped)
		if want := !odd && globModel(pattern).MatchString(p); got != want {
			t.Fatalf("match(%q, %q) = %v, model says %v (refused by the path rules: %v)", pattern, escaped, got, want, odd)
		}
		if lit, ok := strings.CutSuffix(pattern, "/**"); ok && !strings.Contains(lit, "*") && !odd {
			if want := p == lit || strings.HasPrefix(p, lit+"/") || lit == ""; got != want {
				t.Fatalf("match(%q, %q) = %v; /P/** must match /P and everything below it", pattern, p, got)
			}
		}
		n := int(strip % 8)
		if matches(newMatcher(config.Match{Path: pattern, AllowEncodedSlash: true}), r) {
			// What strip_prefix removes is what the pattern matched, even
			// where a segment holds an encoded slash.
			pat, segs := splitPath(pattern), strings.Split(escaped, "/")[1:]
			for i := 0; i < n && i < len(pat) && i < len(segs) && !strings.Contains(pat[i], "*"); i++ {
				if d, _ := url.PathUnescape(segs[i]); d != pat[i] {
					t.Fatalf("allow_encoded_slash: %q matched %q, but strip_prefix %d removes segment %q", pattern, escaped, n, segs[i])
				}
			}
		}
		if !got {
			return
		}
		stripped := StripSegments(escaped, n)
		if !strings.HasPrefix(stripped, "/") || (stripped != "/" && !strings.HasSuffix(escaped, stripped[1:])) {
			t.Fatalf("StripSegments(%q, %d) = %q: not a tail of the path", escaped, n, stripped)
		}
	})
}
