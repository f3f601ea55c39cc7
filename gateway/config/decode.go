package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/sluice-gw/sluice/gateway/keysource"
	"github.com/sluice-gw/sluice/httplimit"
)

// decodeBudget bounds the number of values decoded from one file, so that
// aliases used as a "billion laughs" cannot make the loader run for long:
// baseBudget plus one value per two bytes of the file, more than a file
// without aliases can hold.
const baseBudget = 200_000

func decodeBudget(size int) int { return baseBudget + size/2 }

// maxMergeDepth bounds nested merge keys ("<<: *base"), which could otherwise
// refer to themselves.
const maxMergeDepth = 32

// decoder turns a goccy/go-yaml AST into Config structs. It is strict: an
// unknown field or a value of the wrong type is an error at the value's line
// and column. Unlike a decoder that stops at the first problem, it goes on
// and reports every one. It also expands ${NAME} in string scalars (after
// parsing, so a variable's value can never change the YAML structure) and
// records where each value sits, so that validation can point at it.
type decoder struct {
	file   string
	lookup func(string) (string, bool)
	errs   Errors

	pos    map[string]token.Position // path → position of the value given there
	parent map[string]string         // quoted map key path → its parent's path
	bad    map[string]bool           // paths whose value could not be decoded
	blank  map[string]bool           // paths of text values given as ""
	order  map[string][]string       // map path → its keys in file order

	anchors map[string][]*ast.AnchorNode // name → anchors in document order
	size    int                          // of the file, in bytes
	budget  int                          // values left to decode
	// verbatim turns ${NAME} expansion off: envoyproxy/ratelimit's files
	// are read as that service reads them.
	verbatim bool
}

// budgetLimit returns the decoder's initial budget.
func (d *decoder) budgetLimit() int { return decodeBudget(d.size) }

func newDecoder(file string, lookup func(string) (string, bool), size int) *decoder {
	return &decoder{
		file:    file,
		lookup:  lookup,
		pos:     map[string]token.Position{},
		parent:  map[string]string{},
		bad:     map[string]bool{},
		blank:   map[string]bool{},
		order:   map[string][]string{},
		anchors: map[string][]*ast.AnchorNode{},
		size:    size,
		budget:  decodeBudget(size),
	}
}

// yamlError is what goccy/go-yaml's parse errors implement.
type yamlError interface {
	GetToken() *token.Token
	GetMessage() string
}

// parse parses data as one YAML document and returns its body (nil for an
// empty document). ok is false when data is not valid YAML; the problem has
// then been recorded.
func (d *decoder) parse(data []byte) (body ast.Node, ok bool) {
	defer func() {
		// A parser bug must not take the gateway down on SIGHUP; report it
		// as what it is, a file we cannot read.
		if r := recover(); r != nil {
			d.errs = append(d.errs, &Error{File: d.file, Line: 1, Col: 1,
				Message: fmt.Sprintf("invalid YAML (the parser failed: %v)", r)})
			body, ok = nil, false
		}
	}()
	if !utf8.Valid(data) {
		line, col := invalidUTF8(data)
		d.errs = append(d.errs, &Error{File: d.file, Line: line, Col: col, Message: "invalid YAML: the file is not valid UTF-8"})
		return nil, false
	}
	if line, col, deep := tooDeep(data); deep {
		d.errs = append(d.errs, &Error{File: d.file, Line: line, Col: col,
			Message: fmt.Sprintf("nesting is too deep (over %d levels of indentation, list dashes and brackets)", maxNesting)})
		return nil, false
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		e := &Error{File: d.file, Line: 1, Col: 1, Message: "invalid YAML: " + err.Error()}
		if ye, isYAML := err.(yamlError); isYAML {
			e.Message = "invalid YAML: " + ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				e.Line, e.Col = max(1, tk.Position.Line), max(1, tk.Position.Column)
			}
		}
		d.errs = append(d.errs, e)
		return nil, false
	}
	for _, doc := range f.Docs {
		if doc == nil || isNil(doc.Body) {
			continue
		}
		if body != nil {
			d.errAt(doc.Body, "", "a configuration is one YAML document; found a second one")
			return nil, false
		}
		body = doc.Body
	}
	if body != nil {
		ast.Walk(anchorCollector(d.anchors), body)
	}
	return body, true
}

// invalidUTF8 returns the line and column (in runes) of the first byte of
// data that is not valid UTF-8.
func invalidUTF8(data []byte) (line, col int) {
	line, col = 1, 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, col
		case r == '\n':
			line, col = line+1, 1
		default:
			col++
		}
		data = data[size:]
	}
	return line, col
}

// maxNesting bounds how deeply a file may nest. The parser's time grows
// faster than linearly with nesting (100,000 '[' take a minute), and no
// configuration comes close: sluice's schema is a few levels deep.
const maxNesting = 500

// tooDeep reports where data nests deeper than maxNesting, counting a line's
// leading spaces and "- " indicators plus the open flow brackets. Brackets
// inside quoted strings count too; that errs on the safe side.
func tooDeep(data []byte) (line, col int, deep bool) {
	depth := 0
	line = 1
	for i := 0; i < len(data); line++ {
		j := i
		for j < len(data) && (data[j] == ' ' || data[j] == '-' && j+1 < len(data) && data[j+1] == ' ') {
			j++
		}
		if depth+j-i > maxNesting {
			return line, maxNesting - depth + 1, true
		}
		for ; j < len(data) && data[j] != '\n'; j++ {
			switch data[j] {
			case '[', '{':
				depth++
				if depth > maxNesting {
					return line, j - i + 1, true
				}
			case ']', '}':
				depth = max(0, depth-1)
			}
		}
		i = j + 1
	}
	return 0, 0, false
}

// anchorCollector records every anchor of a document.
type anchorCollector map[string][]*ast.AnchorNode

// Visit implements ast.Visitor.
func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && !isNil(an.Name) {
		name := an.Name.GetToken().Value
		a[name] = append(a[name], an)
	}
	return a
}

// errAt records a problem at node n.
func (d *decoder) errAt(n ast.Node, path, msg string) {
	p := position(n)
	d.errs = append(d.errs, &Error{File: d.file, Line: p.Line, Col: p.Column, Path: path, Message: msg})
}

// fail records a problem with the value at path and marks path bad, so that
// validation does not report the zero value left there.
func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.errAt(n, path, fmt.Sprintf(format, args...))
}

// position returns where n starts; 1:1 when unknown.
func position(n ast.Node) token.Position {
	// A block mapping's token is its first ':'; point at its first key.
	switch t := n.(type) {
	case *ast.MappingNode:
		if !t.IsFlowStyle && len(t.Values) > 0 && t.Values[0] != nil && !isNil(t.Values[0].Key) {
			return position(t.Values[0].Key)
		}
	case *ast.MappingValueNode:
		if !isNil(t.Key) {
			return position(t.Key)
		}
	}
	if !isNil(n) {
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			p := *tk.Position
			p.Line, p.Column = max(1, p.Line), max(1, p.Column)
			return p
		}
	}
	return token.Position{Line: 1, Column: 1}
}

// isNil reports whether n is nil or a nil pointer in an interface.
func isNil(n ast.Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// before reports whether position a comes before b.
func before(a, b token.Position) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
}

// resolve follows anchors, aliases and tags to the node that holds the
// value. It returns nil for a null or absent value, and ok false after
// recording a problem.
func (d *decoder) resolve(n ast.Node, path string) (ast.Node, bool) {
	for range 64 {
		if isNil(n) {
			return nil, true
		}
		switch t := n.(type) {
		case *ast.NullNode:
			return nil, true
		case *ast.AnchorNode:
			n = t.Value
		case *ast.TagNode:
			switch tag := t.Start.Value; tag {
			case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
			default:
				d.fail(n, path, "unsupported YAML tag %q", tag)
				return nil, false
			}
			n = t.Value
		case *ast.AliasNode:
			if isNil(t.Value) {
				d.fail(n, path, "alias without a name")
				return nil, false
			}
			name := t.Value.GetToken().Value
			var target *ast.AnchorNode
			for _, a := range d.anchors[name] {
				if before(position(a), position(n)) {
					target = a
				}
			}
			if target == nil {
				d.fail(n, path, "alias *%s refers to no anchor &%s defined before it", name, name)
				return nil, false
			}
			n = target.Value
		default:
			return n, true
		}
	}
	d.fail(n, path, "too many nested anchors, aliases or tags")
	return nil, false
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	keyType      = reflect.TypeFor[httplimit.Key]()
	keyPartType  = reflect.TypeFor[httplimit.KeyPart]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// keyForms returns the key syntax, for messages: every key source
// keysource knows.
func keyForms() string { return keysource.Forms() }

// decode decodes node n, found at path, into v. opt is the `yaml` tag's
// option ("rate" for rate fields).
func (d *decoder) decode(n ast.Node, path string, v reflect.Value, opt string) {
	n, ok := d.resolve(n, path)
	if !ok || n == nil {
		return
	}
	d.pos[path] = position(n)
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 {
			d.errAt(n, path, fmt.Sprintf("too many values after expanding aliases (over %d for a file of this size)", d.budgetLimit()))
		}
		d.bad[path] = true
		return
	}
	switch {
	case v.Type() == durationType:
		d.decodeDuration(n, path, v)
		return
	case v.Type() == keyType:
		d.decodeKey(n, path, v)
		return
	case v.Type() == keyPartType:
		d.decodeKeyPart(n, path, v)
		return
	case reflect.PointerTo(v.Type()).Implements(textType):
		d.decodeText(n, path, v, "a string", true)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, path, v.Elem(), opt)
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Map:
		d.decodeMap(n, path, v)
	case reflect.Slice:
		d.decodeSlice(n, path, v)
	case reflect.String:
		if s, ok := d.text(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		d.decodeBool(n, path, v)
	case reflect.Int, reflect.Int64:
		d.decodeInt(n, path, v)
	case reflect.Float64:
		d.decodeFloat(n, path, v, opt == "rate")
	default:
		panic(fmt.Sprintf("config: no decoder for %v", v.Type())) // a schema bug, caught by any test
	}
}

// describe returns how a value is shown in messages: "a mapping", "a list",
// or the scalar quoted.
func describe(n ast.Node) string {
	switch t := n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return strconv.Quote(t.Value)
	case *ast.LiteralNode:
		if t.Value != nil {
			return strconv.Quote(t.Value.Value)
		}
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return n.Type().String()
}

// text returns a scalar's text, with ${NAME} expanded in strings; what names
// the expected type in the error for a mapping or a list.
func (d *decoder) text(n ast.Node, path, what string) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return d.expand(n, path, t.Value)
	case *ast.LiteralNode:
		if t.Value == nil {
			return "", true
		}
		return d.expand(n, path, t.Value.Value)
	case *ast.MappingNode, *ast.MappingValueNode:
		if s, ok := glued(n); ok {
			return d.expand(n, path, s)
		}
		d.fail(n, path, "expected %s, got %s", what, describe(n))
		return "", false
	case *ast.SequenceNode:
		d.fail(n, path, "expected %s, got %s", what, describe(n))
		return "", false
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value, true
	}
	d.fail(n, path, "expected %s, got %s", what, n.Type())
	return "", false
}

// glued recovers a plain scalar such as header:X-User-Id that
// goccy/go-yaml v1.19 misreads as a one-pair mapping when it stands in a
// flow sequence inside a flow mapping ({key: [header:X-User-Id, path]}). In
// YAML a ':' not followed by a space belongs to the scalar, so a mapping
// whose key, ':' and value touch on one line, all unquoted, is that scalar.
func glued(n ast.Node) (string, bool) {
	var mv *ast.MappingValueNode
	switch t := n.(type) {
	case *ast.MappingNode:
		if len(t.Values) != 1 {
			return "", false
		}
		mv = t.Values[0]
	case *ast.MappingValueNode:
		mv = t
	}
	if mv == nil || mv.Start == nil || isNil(mv.Key) || isNil(mv.Value) {
		return "", false
	}
	switch mv.Value.(type) {
	case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode:
	default:
		return "", false
	}
	k, v := mv.Key.GetToken(), mv.Value.GetToken()
	if k == nil || v == nil || k.Position == nil || v.Position == nil || mv.Start.Position == nil {
		return "", false
	}
	if k.Type == token.DoubleQuoteType || k.Type == token.SingleQuoteType ||
		v.Type == token.DoubleQuoteType || v.Type == token.SingleQuoteType {
		return "", false
	}
	kp, cp, vp := k.Position, mv.Start.Position, v.Position
	if kp.Line != cp.Line || cp.Line != vp.Line ||
		kp.Column+utf8.RuneCountInString(k.Value) != cp.Column || cp.Column+1 != vp.Column {
		return "", false
	}
	return k.Value + ":" + v.Value, true
}

// expand expands variables in s, the text of node n, reporting problems.
func (d *decoder) expand(n ast.Node, path, s string) (string, bool) {
	if d.verbatim {
		return s, true
	}
	out, problems := expand(s, d.lookup)
	for _, p := range problems {
		d.fail(n, path, "%s", p)
	}
	return out, len(problems) == 0
}

func (d *decoder) decodeDuration(n ast.Node, path string, v reflect.Value) {
	const want = "a duration such as 30s, 1m30s or 250ms"
	switch t := n.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		if t.GetToken() != nil && isZeroNumber(t.GetToken().Value) {
			v.SetInt(0)
			return
		}
		d.fail(n, path, "expected %s, got %s (a number needs a unit)", want, describe(n))
		return
	}
	s, ok := d.text(n, path, want)
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.fail(n, path, "expected %s, got %q", want, s)
		return
	}
	v.SetInt(int64(dur))
}

// isZeroNumber reports whether s is a YAML number equal to zero.
func isZeroNumber(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == 0
}

func (d *decoder) decodeBool(n ast.Node, path string, v reflect.Value) {
	if b, ok := n.(*ast.BoolNode); ok {
		v.SetBool(b.Value)
		return
	}
	s, ok := d.text(n, path, "true or false")
	if !ok {
		return
	}
	switch s {
	case "true", "True", "TRUE":
		v.SetBool(true)
	case "false", "False", "FALSE":
		v.SetBool(false)
	default:
		d.fail(n, path, "expected true or false, got %s", quoteIfString(n, s))
	}
}

// quoteIfString quotes s when n is a string node, so that messages show
// "yes" for a string and 12 for a number.
func quoteIfString(n ast.Node, s string) string {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		return strconv.Quote(s)
	}
	return s
}

func (d *decoder) decodeInt(n ast.Node, path string, v reflect.Value) {
	const want = "an integer"
	var i int64
	switch t := n.(type) {
	case *ast.IntegerNode:
		switch x := t.Value.(type) {
		case int64:
			i = x
		case uint64:
			if x > math.MaxInt64 {
				d.fail(n, path, "integer %s is out of range", describe(n))
				return
			}
			i = int64(x)
		default:
			d.fail(n, path, "expected %s, got %s", want, describe(n))
			return
		}
	default:
		s, ok := d.text(n, path, want)
		if !ok {
			return
		}
		var err error
		i, err = strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			d.fail(n, path, "integer %s is out of range", s)
			return
		}
		if err != nil {
			// Accept an integral float such as 1e6; reject 2.5 and text.
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 || strings.ContainsAny(s, "xXpP_") {
				d.fail(n, path, "expected %s, got %s", want, quoteIfString(n, s))
				return
			}
			i = int64(f)
		}
	}
	if v.OverflowInt(i) {
		d.fail(n, path, "integer %d is out of range", i)
		return
	}
	v.SetInt(i)
}

func (d *decoder) decodeFloat(n ast.Node, path string, v reflect.Value, rate bool) {
	switch t := n.(type) {
	case *ast.FloatNode:
		v.SetFloat(t.Value)
		return
	case *ast.IntegerNode:
		switch x := t.Value.(type) {
		case int64:
			v.SetFloat(float64(x))
		case uint64:
			v.SetFloat(float64(x))
		}
		return
	case *ast.NanNode:
		v.SetFloat(math.NaN())
		return
	case *ast.InfinityNode:
		v.SetFloat(t.Value)
		return
	}
	want := "a number"
	if rate {
		want = "a rate per second such as 10, 0.5 or \"100/1m\""
	}
	s, ok := d.text(n, path, want)
	if !ok {
		return
	}
	if rate {
		r, err := ParseRate(s)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		v.SetFloat(r)
		return
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.fail(n, path, "expected %s, got %s", want, quoteIfString(n, s))
		return
	}
	v.SetFloat(f)
}

// decodeText decodes a scalar into v, whose pointer is an
// encoding.TextUnmarshaler; what describes the value for messages. With
// blank set, a value given as "" is recorded in d.blank and left zero, for
// the validator to report: an empty mode is not a way to ask for the
// default.
func (d *decoder) decodeText(n ast.Node, path string, v reflect.Value, what string, blank bool) {
	s, ok := d.text(n, path, what)
	if !ok {
		return
	}
	if s == "" && blank {
		d.blank[path] = true
		return
	}
	if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		d.fail(n, path, "%v", err)
	}
}

// decodeKeyPart decodes one key part spec (keysource.Parse).
func (d *decoder) decodeKeyPart(n ast.Node, path string, v reflect.Value) {
	s, ok := d.text(n, path, "a key part ("+keyForms()+")")
	if !ok {
		return
	}
	p, err := keysource.Parse(s)
	if err != nil {
		d.fail(n, path, "%v", err)
		return
	}
	v.Set(reflect.ValueOf(p))
}

// decodeKey accepts one key part or a list of them.
func (d *decoder) decodeKey(n ast.Node, path string, v reflect.Value) {
	seq, isSeq := n.(*ast.SequenceNode)
	if !isSeq {
		s, ok := d.text(n, path, "a key ("+keyForms()+") or a list of them")
		if !ok {
			return
		}
		p, err := keysource.Parse(s)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(httplimit.Key{p}))
		return
	}
	if len(seq.Values) == 0 {
		d.fail(n, path, "key list is empty (give one or more of %s)", keyForms())
		return
	}
	var k httplimit.Key
	for i, e := range seq.Values {
		ep := fmt.Sprintf("%s[%d]", path, i)
		var part httplimit.KeyPart
		d.decode(e, ep, reflect.ValueOf(&part).Elem(), "")
		if d.bad[ep] {
			d.bad[path] = true
		}
		if _, given := d.pos[ep]; !given {
			d.fail(seq, ep, "key part is empty (give one of %s)", keyForms())
		}
		k = append(k, part)
	}
	v.Set(reflect.ValueOf(k))
}

func (d *decoder) decodeSlice(n ast.Node, path string, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(n, path, "expected a list, got %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, e := range seq.Values {
		d.decode(e, fmt.Sprintf("%s[%d]", path, i), out.Index(i), "")
	}
	v.Set(out)
}

// pair is one key and value of a mapping, after merge keys are applied.
type pair struct {
	key     string
	keyNode ast.Node
	val     ast.Node
}

// pairs returns the entries of mapping n, applying merge keys ("<<: *base",
// whose entries come after the mapping's own and never replace them). ok is
// false when n is not a mapping.
func (d *decoder) pairs(n ast.Node, path string, depth int) ([]pair, bool) {
	var mvs []*ast.MappingValueNode
	switch t := n.(type) {
	case *ast.MappingNode:
		mvs = t.Values
	case *ast.MappingValueNode:
		mvs = []*ast.MappingValueNode{t}
	default:
		return nil, false
	}
	var own, merged []pair
	for _, mv := range mvs {
		if mv == nil {
			continue
		}
		var kn ast.Node = mv.Key
		if mk, ok := kn.(*ast.MappingKeyNode); ok {
			kn = mk.Value
		}
		if _, isMerge := kn.(*ast.MergeKeyNode); isMerge {
			merged = append(merged, d.mergePairs(mv.Value, path, depth)...)
			continue
		}
		kn, ok := d.resolve(kn, path)
		if !ok {
			continue
		}
		if kn == nil {
			d.errAt(mv, path, "a mapping key is empty")
			continue
		}
		var key string
		switch t := kn.(type) {
		case *ast.StringNode:
			key = t.Value
		case *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode, *ast.LiteralNode:
			d.errAt(kn, path, "a mapping key must be a plain string, got "+describe(kn))
			continue
		default:
			if tk := kn.GetToken(); tk != nil {
				key = tk.Value
			}
		}
		own = append(own, pair{key: key, keyNode: kn, val: mv.Value})
	}
	seen := make(map[string]bool, len(own))
	for _, p := range own {
		seen[p.key] = true
	}
	for _, p := range merged {
		if !seen[p.key] {
			seen[p.key] = true
			own = append(own, p)
		}
	}
	return own, true
}

// mergePairs returns the entries a merge key's value brings: a mapping, or a
// list of mappings where earlier ones win.
func (d *decoder) mergePairs(val ast.Node, path string, depth int) []pair {
	if depth >= maxMergeDepth {
		d.errAt(val, path, "merge keys (<<) nested too deep")
		return nil
	}
	n, ok := d.resolve(val, path)
	if !ok || n == nil {
		return nil
	}
	if seq, isSeq := n.(*ast.SequenceNode); isSeq {
		var out []pair
		for _, e := range seq.Values {
			out = append(out, d.mergePairs(e, path, depth+1)...)
		}
		return out
	}
	ps, ok := d.pairs(n, path, depth+1)
	if !ok {
		d.errAt(n, path, "a merge key (<<) needs a mapping or a list of mappings, got "+describe(n))
	}
	return ps
}

// field is a struct field as the decoder sees it.
type field struct {
	name  string
	index int
	opt   string
}

// fields returns the YAML fields of struct type t in declaration order.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		out = append(out, field{name: name, index: i, opt: opt})
	}
	return out
}

func (d *decoder) decodeStruct(n ast.Node, path string, v reflect.Value) {
	fs := fields(v.Type())
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	ps, ok := d.pairs(n, path, 0)
	if !ok {
		d.fail(n, path, "expected a mapping with fields %s; got %s", strings.Join(names, ", "), describe(n))
		return
	}
	for _, p := range ps {
		i := -1
		for j, f := range fs {
			if f.name == p.key {
				i = j
				break
			}
		}
		if i < 0 && path == "" && strings.HasPrefix(p.key, "x-") {
			continue // an extension field, a place for anchors
		}
		if i < 0 {
			d.errAt(p.keyNode, path, unknownField(p.key, names))
			continue
		}
		d.decode(p.val, joinPath(path, p.key), v.Field(fs[i].index), fs[i].opt)
	}
}

// unknownField words the error for an unknown field, suggesting a near miss.
func unknownField(key string, names []string) string {
	msg := fmt.Sprintf("unknown field %q", key)
	best, bestDist := "", 3
	for _, n := range names {
		if dist := editDistance(strings.ToLower(key), n); dist < bestDist {
			best, bestDist = n, dist
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg + " (allowed: " + strings.Join(names, ", ") + ")"
}

// editDistance is the Levenshtein distance between a and b, capped for long
// inputs since it only serves suggestions.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (d *decoder) decodeMap(n ast.Node, path string, v reflect.Value) {
	ps, ok := d.pairs(n, path, 0)
	if !ok {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(ps)))
	}
	for _, p := range ps {
		key, ok := d.expand(p.keyNode, path, p.key)
		if !ok {
			continue
		}
		kp := mapPath(path, key)
		if _, dup := d.pos[kp]; dup {
			d.errAt(p.keyNode, path, fmt.Sprintf("duplicate key %q", key))
			continue
		}
		if strings.HasSuffix(kp, "]") {
			d.parent[kp] = path // parentOf cannot take a quoted key apart
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.val, kp, elem, "")
		if _, given := d.pos[kp]; !given {
			d.pos[kp] = position(p.keyNode) // a null value: point at the key
		}
		v.SetMapIndex(reflect.ValueOf(key), elem)
		d.order[path] = append(d.order[path], key)
	}
}

// joinPath returns the path of field name under path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// mapPath returns the path of map key k under path: ".k" for a simple key,
// `["k"]` otherwise.
func mapPath(path, k string) string {
	simple := k != ""
	for i := 0; i < len(k) && simple; i++ {
		c := k[i]
		simple = c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	if simple {
		return joinPath(path, k)
	}
	return path + "[" + strconv.Quote(k) + "]"
}
