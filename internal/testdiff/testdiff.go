// Package testdiff compares values in tests on the standard library alone,
// so that the library module's tests need no comparison module and its
// go.mod, which every library user's module graph lists, requires none.
package testdiff

import (
	"fmt"
	"reflect"
)

// Equal reports whether a and b are deeply equal (reflect.DeepEqual).
func Equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// Diff returns "" when want and got are deeply equal, else both values
// formatted with %#v (maps in key order), want on a line starting with "-"
// and got on one starting with "+", as a test prints them under
// "(-want +got)".
func Diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return fmt.Sprintf("-%#v\n+%#v", want, got)
}
