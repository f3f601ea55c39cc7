package scgimport

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// node is one value of Spring Boot's merged configuration: a scalar, a map
// or a list, with where it was written.
type node struct {
	file string
	line int

	isScalar bool
	scalar   string

	keys []string          // a map's keys in order, canonical (see canon)
	raw  map[string]string // canonical key → key as written
	m    map[string]*node

	isList bool
	list   []*node
}

func newMap(file string, line int) *node {
	return &node{file: file, line: line, raw: map[string]string{}, m: map[string]*node{}}
}

// canon is Spring Boot's relaxed form of a property name part: lower case
// without '-' and '_', so that default-filters, defaultFilters and
// default_filters are one name.
func canon(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("-", "", "_", "").Replace(s)
}

// get returns the child at a dotted path of canonical names, or nil.
func (n *node) get(path string) *node {
	for _, part := range strings.Split(path, ".") {
		if n == nil || n.m == nil {
			return nil
		}
		n = n.m[canon(part)]
	}
	return n
}

// set puts child under key k of map n.
func (n *node) set(k string, child *node) {
	c := canon(k)
	if _, ok := n.m[c]; !ok {
		n.keys = append(n.keys, c)
	}
	n.raw[c] = k
	n.m[c] = child
}

// items returns a list's elements; a map whose keys are all list indices
// (from .properties) counts as a list in index order.
func (n *node) items() []*node {
	if n == nil {
		return nil
	}
	if n.isList {
		return n.list
	}
	if n.isScalar {
		return []*node{n}
	}
	type ix struct {
		i int
		n *node
	}
	var xs []ix
	for _, k := range n.keys {
		if !strings.HasPrefix(k, "#") {
			return nil
		}
		i, err := strconv.Atoi(k[1:])
		if err != nil {
			return nil
		}
		xs = append(xs, ix{i, n.m[k]})
	}
	slices.SortFunc(xs, func(a, b ix) int { return a.i - b.i })
	out := make([]*node, len(xs))
	for i, x := range xs {
		out[i] = x.n
	}
	return out
}

// text returns a scalar's value, or a list of scalars joined by commas (a
// comma-separated value binds to a list in Spring Boot, and back).
func (n *node) text() (string, bool) {
	if n == nil {
		return "", false
	}
	if n.isScalar {
		return n.scalar, true
	}
	items := n.items()
	if len(items) == 0 {
		return "", false
	}
	var parts []string
	for _, it := range items {
		if !it.isScalar {
			return "", false
		}
		parts = append(parts, it.scalar)
	}
	return strings.Join(parts, ","), true
}

// flatten returns the scalar leaves under map n as dotted canonical keys
// (an args map written nested or with dotted keys reads the same).
func (n *node) flatten() map[string]*node {
	out := map[string]*node{}
	var walk func(prefix string, x *node)
	walk = func(prefix string, x *node) {
		if x.isScalar || x.isList {
			out[prefix] = x
			return
		}
		for _, k := range x.keys {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, x.m[k])
		}
	}
	if n != nil && !n.isScalar && !n.isList {
		walk("", n)
	}
	return out
}

// merge lays src over dst as a later property source: maps merge key by
// key, anything else (a scalar, a list) replaces what was there whole, as
// Spring Boot binds a list from one source only.
func merge(dst, src *node) *node {
	if src == nil {
		return dst
	}
	if dst == nil || src.isScalar || src.isList || dst.isScalar || dst.isList || src.listLike() {
		return src
	}
	for _, k := range src.keys {
		dst.set(src.raw[k], merge(dst.m[k], src.m[k]))
	}
	return dst
}

// listLike reports whether a map holds list indices (from .properties).
func (n *node) listLike() bool {
	return len(n.keys) > 0 && strings.HasPrefix(n.keys[0], "#")
}

// document is one YAML document or one part of a .properties file.
type document struct {
	file    string
	line    int
	root    *node
	profile string // the on-profile expression, "" for any
	profLn  int
}

// loadYAML parses a YAML file into documents.
func loadYAML(file string, data []byte) (docs []document, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: invalid YAML (the parser failed: %v)", file, r)
		}
	}()
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %v", file, err)
	}
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		root, err := fromYAML(file, d.Body)
		if err != nil {
			return nil, err
		}
		if root == nil || root.isScalar || root.isList {
			continue
		}
		docs = append(docs, document{file: file, line: root.line, root: root})
	}
	return docs, nil
}

// fromYAML converts a YAML node; anchors and aliases are followed.
func fromYAML(file string, n ast.Node) (*node, error) {
	return fromYAMLDepth(file, n, 0)
}

func fromYAMLDepth(file string, n ast.Node, depth int) (*node, error) {
	if depth > 100 {
		return nil, fmt.Errorf("%s: nesting too deep", file)
	}
	line := 0
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		line = tk.Position.Line
	}
	switch t := n.(type) {
	case *ast.DocumentNode:
		return fromYAMLDepth(file, t.Body, depth+1)
	case *ast.AnchorNode:
		return fromYAMLDepth(file, t.Value, depth+1)
	case *ast.TagNode:
		return fromYAMLDepth(file, t.Value, depth+1)
	case *ast.AliasNode:
		return nil, fmt.Errorf("%s:%d: YAML aliases are not supported by the import; write the value out", file, line)
	case *ast.NullNode:
		return &node{file: file, line: line, isScalar: true}, nil
	case *ast.MappingNode:
		m := newMap(file, line)
		for _, mv := range t.Values {
			if err := addPair(file, m, mv, depth); err != nil {
				return nil, err
			}
		}
		if len(t.Values) > 0 {
			m.line = keyLine(t.Values[0])
		}
		return m, nil
	case *ast.MappingValueNode:
		m := newMap(file, keyLine(t))
		if err := addPair(file, m, t, depth); err != nil {
			return nil, err
		}
		return m, nil
	case *ast.SequenceNode:
		l := &node{file: file, line: line, isList: true}
		for _, v := range t.Values {
			c, err := fromYAMLDepth(file, v, depth+1)
			if err != nil {
				return nil, err
			}
			l.list = append(l.list, c)
		}
		return l, nil
	case *ast.StringNode:
		return &node{file: file, line: line, isScalar: true, scalar: t.Value}, nil
	case *ast.LiteralNode:
		v := ""
		if t.Value != nil {
			v = t.Value.Value
		}
		return &node{file: file, line: line, isScalar: true, scalar: v}, nil
	}
	if tk := n.GetToken(); tk != nil {
		return &node{file: file, line: line, isScalar: true, scalar: tk.Value}, nil
	}
	return nil, fmt.Errorf("%s:%d: unsupported YAML node %s", file, line, n.Type())
}

func keyLine(mv *ast.MappingValueNode) int {
	if mv.Key != nil {
		if tk := mv.Key.GetToken(); tk != nil && tk.Position != nil {
			return tk.Position.Line
		}
	}
	return 0
}

// addPair adds one key: value to m; a dotted key ("spring.cloud.gateway")
// nests as Spring Boot reads it.
func addPair(file string, m *node, mv *ast.MappingValueNode, depth int) error {
	if mv.Key == nil {
		return nil
	}
	key := mv.Key.GetToken().Value
	if k, ok := mv.Key.(*ast.StringNode); ok {
		key = k.Value
	}
	v, err := fromYAMLDepth(file, mv.Value, depth+1)
	if err != nil {
		return err
	}
	line := keyLine(mv)
	if v.line == 0 {
		v.line = line
	}
	if v.isScalar && v.line != line {
		v.line = line
	}
	at := m
	parts := splitPath(key)
	for _, p := range parts[:len(parts)-1] {
		next := at.m[canon(p)]
		if next == nil || next.isScalar || next.isList {
			next = newMap(file, line)
			at.set(p, next)
		}
		at = next
	}
	last := parts[len(parts)-1]
	at.set(last, merge(at.m[canon(last)], v))
	return nil
}

var indexRE = regexp.MustCompile(`^\d+$`)

// splitPath splits a property name into its parts: "a.b[0].c[x.y]" is a,
// b, #0, c, x.y (a bracketed number is a list index, "#n"; other brackets
// hold a map key, dots included).
func splitPath(key string) []string {
	var parts []string
	cur := strings.Builder{}
	flush := func() {
		if cur.Len() > 0 {
			parts = append(parts, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '.':
			flush()
		case '[':
			flush()
			j := strings.IndexByte(key[i:], ']')
			if j < 0 {
				cur.WriteString(key[i:])
				i = len(key)
				continue
			}
			inner := key[i+1 : i+j]
			if indexRE.MatchString(inner) {
				parts = append(parts, "#"+inner)
			} else {
				parts = append(parts, inner)
			}
			i += j
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	if len(parts) == 0 {
		parts = []string{key}
	}
	return parts
}

// loadProperties parses a .properties file into documents.
func loadProperties(file string, data []byte) ([]document, error) {
	pdocs, err := parseProperties(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	var docs []document
	for _, props := range pdocs {
		if len(props) == 0 {
			continue
		}
		root := newMap(file, props[0].line)
		for _, p := range props {
			at := root
			parts := splitPath(p.key)
			for _, part := range parts[:len(parts)-1] {
				next := at.m[canon(part)]
				if next == nil || next.isScalar || next.isList {
					next = newMap(file, p.line)
					at.set(part, next)
				}
				at = next
			}
			at.set(parts[len(parts)-1], &node{file: file, line: p.line, isScalar: true, scalar: p.value})
		}
		docs = append(docs, document{file: file, line: root.line, root: root})
	}
	return docs, nil
}

// load reads one file by its extension.
func load(name string, data []byte) ([]document, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".properties":
		return loadProperties(name, data)
	case ".yml", ".yaml":
		return loadYAML(name, data)
	}
	return nil, fmt.Errorf("%s: not a .yml, .yaml or .properties file", name)
}
