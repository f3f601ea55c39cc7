// Package keysource is the registry of the key sources a sluice
// configuration may name in a limit's key, plans.from and every other key
// spec: "header:NAME", "query:NAME", "ip", "route", "path" and
// "const:TEXT", which httplimit reads itself ([httplimit.ParseKey]), and
// sources that need more than httplimit knows, registered here by kind and
// built on [httplimit.FuncKeyPart]: "cookie:NAME" (cookie.go) and
// "client_cert:FIELD", the verified TLS client certificate's subject or
// common name (tlscert.go).
//
// A source that needs another library (a token's claims, say) lives in a
// package of its own that registers it from an init function; the
// configuration package and httplimit stay as they are.
package keysource

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sluice-gw/sluice/httplimit"
)

// Parser makes the key part of one spec of its kind from the spec's
// argument, the text after "kind:", trimmed ("" for a kind without one).
// Its error says what is wrong with the argument; Parse adds the spec.
type Parser func(arg string) (httplimit.KeyPart, error)

// source is one kind of spec.
type source struct {
	form   string // the spec's syntax, for messages: "cookie:NAME", "ip"
	hasArg bool
	parse  func(spec, arg string) (httplimit.KeyPart, error)
}

// The registry. httplimit's own sources are in it before any init
// function runs, so that they come first in Forms.
var (
	mu             sync.RWMutex
	kinds, ordered = builtins()
)

// builtins returns httplimit's own sources, parsed by httplimit.ParseKey so
// that its rules and messages hold as they are.
func builtins() (map[string]*source, []*source) {
	parse := func(spec, _ string) (httplimit.KeyPart, error) { return httplimit.ParseKey(spec) }
	m := map[string]*source{}
	var list []*source
	for _, form := range []string{"header:NAME", "query:NAME", "ip", "route", "path", "const:TEXT"} {
		kind, _, hasArg := strings.Cut(form, ":")
		s := &source{form: form, hasArg: hasArg, parse: parse}
		m[kind] = s
		list = append(list, s)
	}
	return m, list
}

// Register adds the source written form: a lowercase kind, followed by
// ":" and a placeholder for its argument if it takes one, such as
// "cookie:NAME". Specs of that kind are then parsed by p. It panics if the
// kind is already registered or is not lowercase letters, digits, '-' and
// '_' starting with a letter: a programming error, found at init.
func Register(form string, p Parser) {
	if p == nil {
		panic("keysource: Register " + form + " with a nil Parser")
	}
	add(form, func(spec, arg string) (httplimit.KeyPart, error) {
		kp, err := p(arg)
		if err != nil {
			return httplimit.KeyPart{}, &specError{msg: fmt.Sprintf("key %q: %v", spec, err), err: err}
		}
		if _, err := kp.MarshalText(); err != nil {
			return httplimit.KeyPart{}, &specError{msg: fmt.Sprintf("key %q: the %s source returned an invalid part", spec, form), err: err}
		}
		return kp, nil
	})
}

func add(form string, parse func(spec, arg string) (httplimit.KeyPart, error)) {
	kind, _, hasArg := strings.Cut(form, ":")
	if !validKind(kind) {
		panic(fmt.Sprintf("keysource: kind %q of %q is not lowercase letters, digits, '-' and '_' starting with a letter", kind, form))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[kind]; dup {
		panic("keysource: kind " + kind + " registered twice")
	}
	s := &source{form: form, hasArg: hasArg, parse: parse}
	kinds[kind] = s
	ordered = append(ordered, s)
}

func validKind(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// Forms returns the syntax of every registered spec, for messages:
// "header:NAME | query:NAME | ip | route | path | const:TEXT | cookie:NAME |
// client_cert:FIELD".
func Forms() string {
	mu.RLock()
	defer mu.RUnlock()
	forms := make([]string, len(ordered))
	for i, s := range ordered {
		forms[i] = s.form
	}
	return strings.Join(forms, " | ")
}

// Parse parses one key part spec as a configuration writes it: one of
// httplimit's own ([httplimit.ParseKey] decides it, with its messages) or
// "kind:ARG" of a registered kind. The kind is lowercase. Errors wrap
// [httplimit.ErrInvalidKey], and their messages stand alone (they do not
// repeat its text), so that a configuration checker can print one after
// the value's position.
func Parse(spec string) (httplimit.KeyPart, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	mu.RLock()
	s := kinds[kind]
	mu.RUnlock()
	if s == nil || s.hasArg != hasArg {
		return httplimit.KeyPart{}, &specError{msg: fmt.Sprintf("unknown key %q (allowed: %s)", spec, Forms())}
	}
	return s.parse(spec, strings.TrimSpace(arg))
}

// ParseKey parses a key given as a list of specs (a single-part key is a
// list of one), as Parse parses each. The list must not be empty; every
// bad spec is reported. Errors wrap [httplimit.ErrInvalidKey].
func ParseKey(specs []string) (httplimit.Key, error) {
	if len(specs) == 0 {
		return nil, &specError{msg: "key list is empty (give one or more of " + Forms() + ")"}
	}
	k := make(httplimit.Key, 0, len(specs))
	var errs []error
	for _, spec := range specs {
		p, err := Parse(spec)
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

// specError is a spec that does not parse. Its message stands alone; it
// wraps httplimit.ErrInvalidKey and the Parser's error, if any.
type specError struct {
	msg string
	err error
}

func (e *specError) Error() string { return e.msg }

func (e *specError) Unwrap() []error {
	if e.err == nil {
		return []error{httplimit.ErrInvalidKey}
	}
	return []error{httplimit.ErrInvalidKey, e.err}
}
