package admin

import (
	"strconv"
	"strings"
)

// Field encodes route and key parts as one string, the field of the
// overrides table: each length-prefixed, so different (route, parts) never
// share a field.
func Field(route string, parts []string) string {
	return string(AppendField(nil, route, parts))
}

// AppendField appends Field(route, parts) to b.
func AppendField(b []byte, route string, parts []string) []byte {
	b = strconv.AppendInt(b, int64(len(route)), 10)
	b = append(b, ':')
	b = append(b, route...)
	for _, p := range parts {
		b = strconv.AppendInt(b, int64(len(p)), 10)
		b = append(b, ':')
		b = append(b, p...)
	}
	return b
}

// ParseField decodes a Field; ok is false for a malformed one.
func ParseField(f string) (route string, parts []string, ok bool) {
	var fields []string
	for f != "" {
		n, rest, found := cutLen(f)
		if !found || n > len(rest) {
			return "", nil, false
		}
		fields = append(fields, rest[:n])
		f = rest[n:]
	}
	if len(fields) < 2 {
		return "", nil, false
	}
	return fields[0], fields[1:], true
}

func cutLen(s string) (int, string, bool) {
	num, rest, found := strings.Cut(s, ":")
	if !found || num == "" || len(num) > 9 {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, rest, true
}
