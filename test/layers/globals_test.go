package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// allowedGlobals are the package-level variables of non-test code that are
// not constants in disguise, keyed "folder.Name", each with why it stays.
var allowedGlobals = map[string]string{
	// component-base metrics must be registered into its process-wide
	// legacyregistry (that is where /metrics serves from), once.
	"autoscaler/metrics.m":          "the component-base metrics (CA's and draxr's), registered into legacyregistry once",
	"simulator/harness.initMetrics": "registers the upstream scheduler's metrics into legacyregistry once; its plugins record into them",
	// A time.Time cannot be a constant; nothing assigns it, and it serves
	// test fixtures only.
	"simulator/fixtures.Epoch": "fixture creation time",
	// -ldflags -X can only set a package-level string variable.
	"scheduler/kubeversion.Release": "draxr's version, stamped at link time by make images",
}

// allowedContextFields are struct fields of type context.Context that
// stay, keyed "folder.Type", each with why.
var allowedContextFields = map[string]string{}

// TestNoPackageLevelMutableState fails on a package-level var in non-test
// code, other than interface assertions (var _ I = ...), sentinel errors,
// compiled regexps, //go:embed data and allowedGlobals; and on a struct
// that stores a context.Context, other than allowedContextFields.
// Registries and settings belong to a value built per use.
func TestNoPackageLevelMutableState(t *testing.T) {
	files := nonTestGoFiles(t, "../..")
	if len(files) < 50 {
		t.Fatalf("read %d Go files; is the walk rooted at the repository?", len(files))
	}
	var bad []string
	for _, f := range files {
		bad = append(bad, mutableGlobals(f)...)
		bad = append(bad, contextFields(f)...)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// TestMutableStateCheck shows the check catches what it is for and lets
// through what it allows.
func TestMutableStateCheck(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the findings, in order; none: clean
	}{
		{"registry map", "package p\nvar handlers = map[string]int{}\n", []string{"p/x.go:2: package-level var handlers"}},
		{"setting", "package p\nvar limit int64 = 5\n", []string{"package-level var limit"}},
		{"sync.Map", "package p\nimport \"sync\"\nvar cache sync.Map\n", []string{"package-level var cache"}},
		{"one bad name of two", "package p\nimport \"errors\"\nvar (\n\tErrX = errors.New(\"x\")\n\tn int\n)\n", []string{"package-level var n"}},
		{"context in a struct", "package p\nimport \"context\"\ntype T struct{ ctx context.Context }\n", []string{"p/x.go:3: struct T stores a context.Context"}},
		{"context in a nested struct", "package p\nimport \"context\"\ntype T struct{ inner struct{ c context.Context } }\n", []string{"struct T stores a context.Context"}},
		{"interface assertion", "package p\nimport \"io\"\ntype w struct{}\nfunc (w) Write(b []byte) (int, error) { return 0, nil }\nvar _ io.Writer = w{}\n", nil},
		{"sentinel errors", "package p\nimport (\"errors\"; \"fmt\")\nvar ErrA = errors.New(\"a\")\nvar ErrB = fmt.Errorf(\"b: %w\", ErrA)\n", nil},
		{"compiled regexp", "package p\nimport \"regexp\"\nvar re = regexp.MustCompile(`a+`)\n", nil},
		{"embedded data", "package p\nimport _ \"embed\"\n//go:embed x.yaml\nvar data []byte\n", nil},
		{"context as a parameter", "package p\nimport \"context\"\nfunc f(ctx context.Context) {}\n", nil},
		{"allowed by name", "package p\nvar Epoch = 1\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "p/x.go"
			if tt.name == "allowed by name" {
				path = "simulator/fixtures/x.go"
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, tt.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			file := goFile{path: path, fset: fset, ast: f}
			got := append(mutableGlobals(file), contextFields(file)...)
			if len(got) != len(tt.want) {
				t.Fatalf("findings %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %q does not contain %q", got[i], w)
				}
			}
		})
	}
}

type goFile struct {
	path string // slash-separated, relative to the repository root
	fset *token.FileSet
	ast  *ast.File
}

func (f goFile) folder() string { return filepath.ToSlash(filepath.Dir(f.path)) }

func (f goFile) line(p token.Pos) int { return f.fset.Position(p).Line }

// nonTestGoFiles parses every non-test .go file under root, skipping
// hidden folders (.cache), testdata and build output.
func nonTestGoFiles(t *testing.T, root string) []goFile {
	t.Helper()
	var out []goFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		out = append(out, goFile{path: filepath.ToSlash(rel), fset: fset, ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// specs calls fn for each top-level spec of a tok declaration (var, type).
func (f goFile) specs(tok token.Token, fn func(*ast.GenDecl, ast.Spec)) {
	for _, decl := range f.ast.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == tok {
			for _, spec := range g.Specs {
				fn(g, spec)
			}
		}
	}
}

func mutableGlobals(f goFile) []string {
	var bad []string
	f.specs(token.VAR, func(g *ast.GenDecl, spec ast.Spec) {
		vs := spec.(*ast.ValueSpec)
		if embedded(g, vs) {
			return
		}
		for i, name := range vs.Names {
			if name.Name == "_" {
				continue // var _ I = T{}: a compile-time assertion
			}
			if i < len(vs.Values) && constantInDisguise(vs.Values[i]) {
				continue
			}
			if _, ok := allowedGlobals[f.folder()+"."+name.Name]; ok {
				continue
			}
			bad = append(bad, f.path+":"+strconv.Itoa(f.line(name.Pos()))+": package-level var "+name.Name+
				": build it per use (a function, a field, an option) or, if it must stay, add it to allowedGlobals with why")
		}
	})
	return bad
}

// constantInDisguise reports a sentinel error or a compiled regexp.
func constantInDisguise(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch qualified(call.Fun) {
	case "errors.New", "fmt.Errorf", "regexp.MustCompile", "regexp.MustCompilePOSIX":
		return true
	}
	return false
}

// qualified is "pkg.Name" for a selector on an identifier, else "".
func qualified(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return pkg.Name + "." + sel.Sel.Name
}

func embedded(g *ast.GenDecl, vs *ast.ValueSpec) bool {
	for _, doc := range []*ast.CommentGroup{vs.Doc, g.Doc} {
		if doc == nil {
			continue
		}
		for _, c := range doc.List {
			if strings.HasPrefix(c.Text, "//go:embed ") {
				return true
			}
		}
	}
	return false
}

func contextFields(f goFile) []string {
	var bad []string
	f.specs(token.TYPE, func(_ *ast.GenDecl, spec ast.Spec) {
		ts := spec.(*ast.TypeSpec)
		if _, ok := allowedContextFields[f.folder()+"."+ts.Name.Name]; ok {
			return
		}
		found := false
		ast.Inspect(ts.Type, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok || found {
				return !found
			}
			for _, field := range st.Fields.List {
				if isContext(field.Type) {
					found = true
					bad = append(bad, f.path+":"+strconv.Itoa(f.line(field.Pos()))+": struct "+ts.Name.Name+
						" stores a context.Context: pass it to the calls that need it")
					return false
				}
			}
			return true
		})
	})
	return bad
}

func isContext(e ast.Expr) bool { return qualified(e) == "context.Context" }
