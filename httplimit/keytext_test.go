package httplimit

import (
	"encoding"
	"errors"
	"strings"
	"testing"
)

var (
	_ encoding.TextUnmarshaler = (*KeyPart)(nil)
	_ encoding.TextMarshaler   = KeyPart{}
	_ encoding.TextUnmarshaler = (*EmptyKey)(nil)
	_ encoding.TextMarshaler   = EmptyKey(0)
)

// TestKeyPartText checks the configuration syntax of a key part and the
// messages a configuration check prints after the value's position.
func TestKeyPartText(t *testing.T) {
	tests := []struct {
		in   string
		want KeyPart
		err  string
	}{
		{in: "ip", want: KeyPart{Source: SourceIP}},
		{in: "route", want: KeyPart{Source: SourceRoute}},
		{in: "path", want: KeyPart{Source: SourcePath}},
		{in: "header:X-User-Id", want: KeyPart{Source: SourceHeader, Name: "X-User-Id"}},
		{in: "query:api_key", want: KeyPart{Source: SourceQuery, Name: "api_key"}},
		{in: "const:a:b c", want: KeyPart{Source: SourceConst, Name: "a:b c"}},
		{in: "header:", err: `key "header:": header name "" is not a valid HTTP header name`},
		{in: "header:X Y", err: `key "header:X Y": header name "X Y" is not a valid HTTP header name`},
		{in: "query:", err: `key "query:": query parameter name is empty`},
		{in: "const:", err: `key "const:": constant text is empty`},
		{in: "IP", err: `unknown key "IP" (allowed: header:NAME | query:NAME | ip | route | path | const:TEXT)`},
		{in: "ip:1", err: "unknown key"},
		{in: "cookie:x", err: "unknown key"},
		{in: "", err: "unknown key"},
	}
	for _, tt := range tests {
		var got KeyPart
		err := got.UnmarshalText([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidKey) {
				t.Errorf("UnmarshalText(%q) error = %v, want one containing %q that wraps ErrInvalidKey", tt.in, err, tt.err)
			}
			if strings.HasPrefix(err.Error(), "invalid key") {
				t.Errorf("UnmarshalText(%q) error = %q, want it without ErrInvalidKey's text", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("UnmarshalText(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if b, err := got.MarshalText(); err != nil || string(b) != tt.in {
			t.Errorf("UnmarshalText(%q).MarshalText() = %q, %v; want a round trip", tt.in, b, err)
		}
	}
	if b, err := (KeyPart{}).MarshalText(); err == nil {
		t.Errorf("KeyPart{}.MarshalText() = %q, want an error", b)
	}
}

func TestEmptyKeyText(t *testing.T) {
	for _, e := range []EmptyKey{EmptyKeyDeny, EmptyKeyAnonymous, EmptyKeySkip} {
		b, err := e.MarshalText()
		var back EmptyKey
		if err != nil || back.UnmarshalText(b) != nil || back != e {
			t.Errorf("EmptyKey %v: MarshalText = %q, %v; UnmarshalText gives %v", e, b, err, back)
		}
	}
	var e EmptyKey
	if err := e.UnmarshalText([]byte("allow")); err == nil || err.Error() != `unknown on_empty_key "allow" (allowed: deny, anonymous, skip)` {
		t.Errorf(`UnmarshalText("allow") = %v, want the unknown on_empty_key error`, err)
	}
	if b, err := EmptyKey(9).MarshalText(); err == nil {
		t.Errorf("EmptyKey(9).MarshalText() = %q, want an error", b)
	}
}
