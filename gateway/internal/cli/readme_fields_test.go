package cli

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/sluice-gw/sluice/gateway/config"
)

// TestREADMEConfigReferenceFields keeps the README's configuration reference
// complete: every YAML key of config.Config, found by walking its struct
// fields' yaml tags (through nested structs, pointers, map values and slice
// elements), appears at its place in the reference block. A field added to
// the config without a line in the reference fails here.
func TestREADMEConfigReferenceFields(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, ok := referenceBlock(string(readme))
	if !ok {
		t.Fatal("README.md has no yaml block under \"## Configuration reference\"")
	}
	var tree map[string]any
	if err := yaml.Unmarshal([]byte(block), &tree); err != nil {
		t.Fatalf("the configuration reference is not YAML: %v", err)
	}
	paths := yamlPaths(reflect.TypeFor[config.Config](), nil, nil, nil)
	if len(paths) < 40 {
		t.Fatalf("found only %d yaml keys in config.Config; the walk is broken", len(paths))
	}
	for _, p := range paths {
		if !hasPath(tree, p) {
			t.Errorf("README's configuration reference lacks %s", strings.Join(p, "."))
		}
	}
}

// referenceBlock returns the first yaml code block after the "Configuration
// reference" heading.
func referenceBlock(readme string) (string, bool) {
	_, after, ok := strings.Cut(readme, "## Configuration reference")
	if !ok {
		return "", false
	}
	_, after, ok = strings.Cut(after, "```yaml\n")
	if !ok {
		return "", false
	}
	block, _, ok := strings.Cut(after, "```")
	return block, ok
}

// yamlPaths returns the path of every yaml key reachable from t, prefixed by
// prefix. A map's values are under the segment "*", a slice's elements under
// "[]". Fields without a yaml tag (unexported state, or types that decode
// themselves from a scalar such as httplimit.KeyPart) add nothing. A struct
// that contains itself (rls descriptors nest) is walked once: its recurrence
// below itself adds no paths, so the reference shows one level.
func yamlPaths(t reflect.Type, prefix []string, out [][]string, stack []reflect.Type) [][]string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map:
		return yamlPaths(t.Elem(), append(prefix, "*"), out, stack)
	case reflect.Slice:
		return yamlPaths(t.Elem(), append(prefix, "[]"), out, stack)
	case reflect.Struct:
	default:
		return out
	}
	for _, s := range stack {
		if s == t {
			return out
		}
	}
	stack = append(stack, t)
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		p := append(append([]string(nil), prefix...), name)
		out = append(out, p)
		out = yamlPaths(f.Type, p, out, stack)
	}
	return out
}

// hasPath reports whether node holds path: a key by name, any value of a map
// for "*" and any element of a list for "[]".
func hasPath(node any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	switch n := node.(type) {
	case map[string]any:
		if path[0] == "*" {
			for _, v := range n {
				if hasPath(v, path[1:]) {
					return true
				}
			}
			return false
		}
		v, ok := n[path[0]]
		return ok && hasPath(v, path[1:])
	case []any:
		if path[0] != "[]" {
			return false
		}
		for _, v := range n {
			if hasPath(v, path[1:]) {
				return true
			}
		}
	}
	return false
}
