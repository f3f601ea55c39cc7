package httplimit

import (
	"errors"
	"fmt"
	"iter"
	"net/textproto"
	"net/url"
	"strings"
)

// Source says where a key part's value comes from.
type Source uint8

// The sources a key part can read.
const (
	// SourceHeader is the first value of a request header, "header:NAME".
	// "header:Host" is the request's host (Request.Host, where Go's server
	// keeps it), as [NormalizeHost] returns it.
	SourceHeader Source = iota + 1
	// SourceQuery is the first value of a query parameter, "query:NAME".
	SourceQuery
	// SourceIP is the client IP address as an [IPResolver] finds it, "ip".
	SourceIP
	// SourceRoute is the route id ([Options].Route), "route".
	SourceRoute
	// SourcePath is the request's URL path, byte for byte, "path".
	SourcePath
	// SourceConst is a fixed text, "const:TEXT": one budget shared by every request.
	SourceConst
	// SourceFunc is a value a function computes from the request
	// ([FuncKeyPart]): a key part httplimit does not read itself, such as
	// a cookie or a token's claim.
	SourceFunc
)

// KeyPart is one element of a rate-limit key: where its value comes from and,
// for header, query and const parts, the name or text. Create one with
// [ParseKey], or with [FuncKeyPart] for a value a function computes. The
// zero value is invalid. KeyParts are comparable; == tells two FuncKeyPart
// results apart unless one is a copy of the other, while Equal compares
// them by name.
type KeyPart struct {
	Source Source
	// Name is the canonical header name, the query parameter name or the
	// constant text; empty for ip, route and path. For SourceFunc it is the
	// name FuncKeyPart was given.
	Name string

	fn *keyFunc // SourceFunc's function
}

// keyFunc holds a SourceFunc part's function, behind a pointer so that a
// KeyPart stays comparable.
type keyFunc struct{ value func(Request) string }

// FuncKeyPart returns a key part whose value fn computes from the request:
// the hook for key sources httplimit does not read itself, such as a cookie
// or a token's claim, which need other libraries. name identifies the part
// in messages, in configuration syntax (String, MarshalText) and in the
// gateway's admin API, such as "cookie:session"; it must not be blank, and
// two parts of one name must compute the same value (Equal takes them as
// equal). fn is called once per request and limit, concurrently for
// different requests, and must be fast. Its result is trimmed like every
// key value; "" means the request has no value, so the limit's OnEmptyKey
// applies.
func FuncKeyPart(name string, fn func(Request) string) KeyPart {
	return KeyPart{Source: SourceFunc, Name: name, fn: &keyFunc{value: fn}}
}

// Equal reports whether p and q read the same value: the same source and
// name. Two FuncKeyPart parts compare by name alone (so a configuration
// parsed twice has equal keys), and comparison libraries such as go-cmp use it.
func (p KeyPart) Equal(q KeyPart) bool { return p.Source == q.Source && p.Name == q.Name }

// Key is a rate-limit key: the values of its parts together name one budget.
// A Key with several parts is a list key; it is empty when any part is.
type Key []KeyPart

// ErrInvalidKey is wrapped by every error ParseKey and ParseKeys return.
var ErrInvalidKey = errors.New("invalid key")

// keyForms is the key syntax, for messages.
const keyForms = "header:NAME | query:NAME | ip | route | path | const:TEXT"

// keyError is a key that does not parse. Its message stands alone, without
// ErrInvalidKey's text, so that a configuration checker can print it after
// the value's position.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }
func (e *keyError) Unwrap() error { return ErrInvalidKey }

func keyErrorf(format string, args ...any) error {
	return &keyError{msg: fmt.Sprintf(format, args...)}
}

// ParseKey parses one key part written as in the configuration:
// "header:NAME", "query:NAME", "ip", "route", "path" or "const:TEXT". The
// kind is lowercase. NAME and TEXT are trimmed and must not be empty; a
// header NAME must be a valid header field name and is canonicalized.
// Errors wrap [ErrInvalidKey].
func ParseKey(spec string) (KeyPart, error) {
	switch spec {
	case "ip":
		return KeyPart{Source: SourceIP}, nil
	case "route":
		return KeyPart{Source: SourceRoute}, nil
	case "path":
		return KeyPart{Source: SourcePath}, nil
	}
	kind, arg, _ := strings.Cut(spec, ":")
	arg = strings.TrimSpace(arg)
	switch {
	case !strings.Contains(spec, ":"):
	case kind == "header":
		if !ValidHeaderName(arg) {
			return KeyPart{}, keyErrorf("key %q: header name %q is not a valid HTTP header name", spec, arg)
		}
		return KeyPart{Source: SourceHeader, Name: textproto.CanonicalMIMEHeaderKey(arg)}, nil
	case kind == "query":
		if arg == "" {
			return KeyPart{}, keyErrorf("key %q: query parameter name is empty", spec)
		}
		return KeyPart{Source: SourceQuery, Name: arg}, nil
	case kind == "const":
		if arg == "" {
			return KeyPart{}, keyErrorf("key %q: constant text is empty", spec)
		}
		return KeyPart{Source: SourceConst, Name: arg}, nil
	}
	return KeyPart{}, keyErrorf("unknown key %q (allowed: %s)", spec, keyForms)
}

// ParseKeys parses a key given as a list of parts (a single-part key is a
// list of one). The list must not be empty. Errors wrap [ErrInvalidKey]; every
// bad part is reported.
func ParseKeys(specs []string) (Key, error) {
	if len(specs) == 0 {
		return nil, keyErrorf("key list is empty (give one or more of %s)", keyForms)
	}
	k := make(Key, 0, len(specs))
	var errs []error
	for _, s := range specs {
		p, err := ParseKey(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k = append(k, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return k, nil
}

// UnmarshalText parses text as [ParseKey] does, so that a KeyPart decodes
// from configuration files and flags.
func (p *KeyPart) UnmarshalText(text []byte) error {
	kp, err := ParseKey(string(text))
	if err != nil {
		return err
	}
	*p = kp
	return nil
}

// MarshalText returns the part in configuration syntax, as String does. It
// fails for a part ParseKey could not have returned.
func (p KeyPart) MarshalText() ([]byte, error) {
	if !p.valid() {
		return nil, keyErrorf("key part %s is not valid", p)
	}
	return []byte(p.String()), nil
}

// String returns the part in configuration syntax, such as "header:X-User-Id".
func (p KeyPart) String() string {
	switch p.Source {
	case SourceHeader:
		return "header:" + p.Name
	case SourceQuery:
		return "query:" + p.Name
	case SourceConst:
		return "const:" + p.Name
	case SourceFunc:
		return p.Name
	case SourceIP:
		return "ip"
	case SourceRoute:
		return "route"
	case SourcePath:
		return "path"
	}
	return fmt.Sprintf("invalid(%d)", p.Source)
}

// String returns the key's parts in configuration syntax, comma separated.
func (k Key) String() string {
	s := make([]string, len(k))
	for i, p := range k {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// valid reports whether p could have come from ParseKey.
func (p KeyPart) valid() bool {
	switch p.Source {
	case SourceHeader:
		return ValidHeaderName(p.Name)
	case SourceQuery, SourceConst:
		return strings.TrimSpace(p.Name) != ""
	case SourceIP, SourceRoute, SourcePath:
		return p.Name == ""
	case SourceFunc:
		return strings.TrimSpace(p.Name) != "" && p.fn != nil && p.fn.value != nil
	}
	return false
}

// resolver holds what resolving a key part needs beyond the request.
type resolver struct {
	route string
	ip    *IPResolver
}

// value returns p's trimmed value for r; empty means absent.
func (rv *resolver) value(p *KeyPart, r Request) string {
	switch p.Source {
	case SourceHeader:
		if p.Name == "Host" {
			return NormalizeHost(r.Host())
		}
		return strings.TrimSpace(r.Header(p.Name))
	case SourceQuery:
		return strings.TrimSpace(queryValue(r.RawQuery(), p.Name))
	case SourceIP:
		return rv.ip.clientKey(r)
	case SourceRoute:
		return rv.route
	case SourcePath:
		return strings.TrimSpace(r.Path())
	case SourceConst:
		return p.Name
	case SourceFunc:
		return strings.TrimSpace(p.fn.value(r))
	}
	return ""
}

// queryValue returns the first value of parameter name in a raw query string,
// as url.Values.Get would after url.ParseQuery, without building the map.
func queryValue(raw, name string) string {
	for v := range QueryValues(raw, name) {
		return v
	}
	return ""
}

// QueryValues yields, in order, the decoded values of parameter name in a
// raw query string, as url.ParseQuery would list them, without building the
// map. Pairs whose escaping is invalid, or that hold a ';', are skipped, as
// ParseQuery skips them. A parameter without '=' has the value "".
func QueryValues(raw, name string) iter.Seq[string] {
	return func(yield func(string) bool) {
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
			if strings.ContainsAny(v, "%+") {
				var err error
				if v, err = url.QueryUnescape(v); err != nil {
					continue
				}
			}
			if !yield(v) {
				return
			}
		}
	}
}

// ValidHeaderName reports whether s is a non-empty RFC 9110 token: a valid
// header field name. Key parts and the gateway's configuration use it.
func ValidHeaderName(s string) bool {
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
