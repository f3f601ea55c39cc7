package config

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} and ${NAME:-default} in s using lookup, and $$ by
// a single $. NAME is a letter or underscore followed by letters, digits and
// underscores. The default is the literal text up to the first '}' (no
// nesting) and is used when NAME is unset or set to the empty string, as in
// sh. A '$' followed by anything else is kept as is. Every problem in s is
// reported, e.g. each unset variable that has no default.
func expand(s string, lookup func(string) (string, bool)) (string, []string) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var problems []string
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			problems = append(problems, fmt.Sprintf("unterminated %q: a variable is written ${NAME} or ${NAME:-default} (write $$ for a literal $)", s[i:]))
			break
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !isVarName(name) {
			problems = append(problems, fmt.Sprintf("invalid variable reference ${%s}: a name is letters, digits and _ not starting with a digit, optionally followed by :-default (write $$ for a literal $)", ref))
			continue
		}
		var v string
		var ok bool
		if lookup != nil {
			v, ok = lookup(name)
		}
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			problems = append(problems, fmt.Sprintf("environment variable %q is not set (give a default with ${%s:-default})", name, name))
		}
	}
	return b.String(), problems
}

// isVarName reports whether s is a valid variable name.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}
