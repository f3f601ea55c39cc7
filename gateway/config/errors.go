package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem found in a configuration: where it is and what is
// wrong. Line and Col are 1-based; they are 0 when the position is unknown,
// as for a Config built in Go and checked with [Config.Validate].
type Error struct {
	// File is the file name given to [Load] or [Parse]; empty for a Config
	// built in Go.
	File string
	// Line and Col locate the offending value (or, for a missing field, the
	// mapping that lacks it).
	Line, Col int
	// Path names the value, e.g. "routes[0].limits[1].policy"; empty for
	// problems with the YAML text itself.
	Path string
	// Message says what is wrong, quoting what was given and stating what is
	// allowed.
	Message string
}

// Error formats e as "FILE:LINE:COL: PATH: MESSAGE", the form `sluice check`
// prints. Parts that are unknown are left out.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in one configuration, sorted by position.
// [Load], [Parse] and [Config.Validate] return it as their error; get at it
// with errors.As. It is never empty when returned as an error.
type Errors []*Error

// Error returns one line per problem, joined by newlines.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual errors, so errors.As can find an *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sorted orders es by line and column (stable, so problems found at the same
// place keep the order they were found in) and drops exact duplicates, which
// an anchor used twice can produce.
func (es Errors) sorted() Errors {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return slices.CompactFunc(es, func(a, b *Error) bool { return *a == *b })
}
