package httplimit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath     = "github.com/sluice-gw/sluice"
	librarySection = "## Use it as a library"
)

// TestSurfaceDocumented: every exported name of the package (top-level
// funcs, types, consts and vars, and the exported methods of exported
// types, as Type.Method) is either used by an example (a selector of this
// package in a .go file under examples/) or named in code in README.md's
// library section, between "## Use it as a library" and the next "## ".
// And every httplimit.Name the section names exists.
func TestSurfaceDocumented(t *testing.T) {
	exported := exportedNames(t)
	section := readmeSection(t)
	named := codeNames(section)
	used := exampleSelectors(t)

	var missing []string
	for _, name := range exported {
		if !named[name] && !used[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("exported names neither used in examples/ nor named in README.md's %q section:\n\t%s\n"+
			"document each in the section's reference list, use it in an example, or unexport it",
			librarySection, strings.Join(missing, "\n\t"))
	}

	known := map[string]bool{}
	for _, name := range exported {
		known[name] = true
	}
	for _, m := range regexp.MustCompile(`httplimit\.([A-Z]\w*(?:\.[A-Z]\w*)?)`).FindAllStringSubmatch(section, -1) {
		if name := m[1]; !known[name] && !known[strings.SplitN(name, ".", 2)[0]] {
			t.Errorf("README.md's library section names httplimit.%s, which the package does not export", name)
		}
	}
}

// exportedNames returns the package's exported top-level names and
// exported methods of exported types (Type.Method), sorted.
func exportedNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
				} else if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
					names = append(names, recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("found no exported names")
	}
	return names
}

// receiverType returns the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// readmeSection returns README.md's library section.
func readmeSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+librarySection+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", librarySection)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

var (
	codeBlock = regexp.MustCompile("(?s)```[a-z]*\n.*?```|`[^`\n]+`")
	dotted    = regexp.MustCompile(`[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*`)
)

// codeNames returns the names the code in a Markdown text mentions, inline
// or in fenced blocks: for httplimit.A.B.C (the package name optional), A
// and A.B.
func codeNames(md string) map[string]bool {
	names := map[string]bool{}
	for _, code := range codeBlock.FindAllString(md, -1) {
		for _, tok := range dotted.FindAllString(code, -1) {
			segs := strings.Split(strings.TrimPrefix(tok, "httplimit."), ".")
			names[segs[0]] = true
			if len(segs) > 1 {
				names[segs[0]+"."+segs[1]] = true
			}
		}
	}
	return names
}

// exampleSelectors returns the names of this package that the Go files
// under examples/ select (httplimit.Name, under whatever name they import
// it).
func exampleSelectors(t *testing.T) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	fset := token.NewFileSet()
	root := filepath.Join("..", "examples")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == modulePath+"/httplimit" {
				local = "httplimit"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
					used[sel.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}
