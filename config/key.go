package config

import (
	"fmt"
	"strings"
)

// KeyKind is where a key part's value comes from.
type KeyKind string

// The kinds of key part. Header, Query and Const carry an argument
// ("header:X-User-Id"); the others stand alone.
const (
	// KeyHeader is the value of the request header named by the argument.
	KeyHeader KeyKind = "header"
	// KeyQuery is the value of the query parameter named by the argument.
	KeyQuery KeyKind = "query"
	// KeyIP is the client IP address (SPEC §2.1: the TCP peer, or read from
	// X-Forwarded-For when the peer is a trusted proxy).
	KeyIP KeyKind = "ip"
	// KeyRoute is the route id: one budget shared by every caller of the route.
	KeyRoute KeyKind = "route"
	// KeyPath is the request path.
	KeyPath KeyKind = "path"
	// KeyConst is the argument itself: one budget shared by every request.
	KeyConst KeyKind = "const"
)

// keyForms is the allowed syntax, for error messages.
const keyForms = "header:NAME | query:NAME | ip | route | path | const:TEXT"

// KeyPart is one part of a limit's key, such as header:X-User-Id.
type KeyPart struct {
	// Kind says where the value comes from.
	Kind KeyKind
	// Arg is the header name, query parameter name or constant text; empty
	// for ip, route and path.
	Arg string
}

// String returns the part in configuration syntax, e.g. "header:X-User-Id".
func (p KeyPart) String() string {
	if p.Arg == "" && (p.Kind == KeyIP || p.Kind == KeyRoute || p.Kind == KeyPath) {
		return string(p.Kind)
	}
	return string(p.Kind) + ":" + p.Arg
}

// ParseKeyPart parses one key part: header:NAME, query:NAME, ip, route, path
// or const:TEXT. Header names must be HTTP tokens; query names and constant
// text must not be empty. Kinds are lowercase and nothing is trimmed.
func ParseKeyPart(s string) (KeyPart, error) {
	switch s {
	case "ip", "route", "path":
		return KeyPart{Kind: KeyKind(s)}, nil
	}
	kind, arg, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == string(KeyHeader):
		if !isToken(arg) {
			return KeyPart{}, fmt.Errorf("key %q: header name %q is not a valid HTTP header name", s, arg)
		}
	case ok && kind == string(KeyQuery):
		if arg == "" {
			return KeyPart{}, fmt.Errorf("key %q: query parameter name is empty", s)
		}
	case ok && kind == string(KeyConst):
		if arg == "" {
			return KeyPart{}, fmt.Errorf("key %q: constant text is empty", s)
		}
	default:
		return KeyPart{}, fmt.Errorf("unknown key %q (allowed: %s)", s, keyForms)
	}
	return KeyPart{Kind: KeyKind(kind), Arg: arg}, nil
}

// Key is a limit's key: the request values that pick a budget. In YAML it is
// one part ("key: ip") or a list of parts ("key: [header:X-User-Id, path]");
// a list's parts form one key, and two different lists never form the same
// key (SPEC §2).
type Key []KeyPart

// String returns the key in configuration syntax: the part alone, or a flow
// list such as "[header:X-User-Id, path]".
func (k Key) String() string {
	if len(k) == 1 {
		return k[0].String()
	}
	parts := make([]string, len(k))
	for i, p := range k {
		parts[i] = p.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// isToken reports whether s is a non-empty RFC 9110 token (a valid header
// name or method).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
