package config

import (
	"maps"
	"slices"
)

// query checks match.query: parameter names are not empty.
func (v *validator) query(p string, q map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name == "" {
			v.errf(mapPath(p, name), "a query parameter name is empty")
		}
	}
}
