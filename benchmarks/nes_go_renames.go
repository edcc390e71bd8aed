// The rename cases of `waferline eval-nes` for Go, found by Go's own type checker (go/types, the resolver gopls
// renames with), independently of the tree-sitter code under test (server/features/next_edit/lexical.py):
//
//	go build -o nes_go_renames benchmarks/nes_go_renames.go
//	./nes_go_renames FILE...   (GOPATH: the packages' sources; GO111MODULE=off)
//
// (not `go run`, which would compile FILE... too). A summary of each package's type errors goes to stderr.
// The files are type-checked a package (a folder and package clause) at a time; imports are read from source where
// GOPATH or GOROOT has them, and are empty stand-ins where not (their selectors are not checked, which leaves
// every local and parameter resolved). For each function (a `func` or a function literal), every named parameter
// and result (kind "parameter"), receiver ("receiver") and local (a `:=`, `var`, `const`, `range` or type switch
// variable declared in its body: "local") is renamed at its declaration: the candidate's locations are every
// identifier that go/types resolves to that object (Info.Uses; a `:=` that declares it again is a use of it; a
// type switch's variable is one object per clause, all renamed together). Printed, one JSON line a file:
// {file, skipped, candidates: [{kind, name, start, locations}]} with byte offsets of the declaration and of every
// other location, in order. A candidate is left out when its function holds a type error (other than an import's:
// the checker may have lost track), when an identifier of that name in its scope is resolved to nothing (a key of
// a composite literal whose type is unknown: a field or a variable), or when a use comes before the declaration.
// Mentions in comments are not edits. benchmarks/nes_cases_go.py makes the cases.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type candidate struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Start     int    `json:"start"`
	Locations []int  `json:"locations"`
}

type fileLine struct {
	File       string         `json:"file"`
	Skipped    map[string]int `json:"skipped"`
	Candidates []candidate    `json:"candidates"`
}

type fallback struct{ source types.Importer }

// Import reads a package from source, or gives an empty stand-in (so its selectors are not errors).
func (f fallback) Import(path string) (*types.Package, error) {
	if pkg, err := f.source.Import(path); err == nil {
		return pkg, nil
	}
	return nil, fmt.Errorf("not found: %s", path)
}

func main() {
	fset := token.NewFileSet()
	imp := fallback{importer.ForCompiler(fset, "source", nil)}
	groups := map[string][]*ast.File{}
	var order []string
	paths := map[*ast.File]string{}
	for _, name := range os.Args[1:] {
		abs, _ := filepath.Abs(name)
		if ok, err := build.Default.MatchFile(filepath.Dir(abs), filepath.Base(abs)); err != nil || !ok {
			line, _ := json.Marshal(fileLine{File: abs, Skipped: map[string]int{"not built here (build constraints)": 1},
				Candidates: []candidate{}})
			fmt.Println(string(line))
			continue
		}
		f, err := parser.ParseFile(fset, abs, nil, parser.ParseComments)
		if err != nil {
			line, _ := json.Marshal(fileLine{File: abs, Skipped: map[string]int{"does not parse": 1}, Candidates: []candidate{}})
			fmt.Println(string(line))
			continue
		}
		key := filepath.Dir(abs) + "\x00" + f.Name.Name
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], f)
		paths[f] = abs
	}
	for _, key := range order {
		files := groups[key]
		info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{},
			Implicits: map[ast.Node]types.Object{}}
		var errs []types.Error
		conf := types.Config{Importer: imp, Error: func(err error) {
			if e, ok := err.(types.Error); ok && !strings.Contains(e.Msg, "could not import") {
				errs = append(errs, e)
			}
		}}
		conf.Check(strings.SplitN(key, "\x00", 2)[1], fset, files, info) // errors: collected above
		fmt.Fprintf(os.Stderr, "%s: %d files, %d type errors\n", strings.SplitN(key, "\x00", 2)[0], len(files), len(errs))
		for i, e := range errs {
			if i < 3 {
				fmt.Fprintf(os.Stderr, "  %s\n", e)
			}
		}
		uses := map[types.Object][]*ast.Ident{}
		for id, obj := range info.Uses {
			uses[obj] = append(uses[obj], id)
		}
		for _, f := range files {
			line := renames(fset, f, info, uses, errs)
			line.File = paths[f]
			out, _ := json.Marshal(line)
			fmt.Println(string(out))
		}
	}
}

type declared struct {
	kind    string
	ident   *ast.Ident
	objects []types.Object // one; a type switch variable: one per clause
	scope   ast.Node       // where an identifier of its name must be resolved
	fn      ast.Node       // the function holding it
}

func renames(fset *token.FileSet, f *ast.File, info *types.Info, uses map[types.Object][]*ast.Ident,
	errs []types.Error) fileLine {
	line := fileLine{Skipped: map[string]int{}, Candidates: []candidate{}}
	tf := fset.File(f.Pos())
	offset := func(p token.Pos) int { return tf.Offset(p) }
	var found []declared
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body != nil {
				found = append(found, fields(info, n.Recv, "receiver", n)...)
				found = append(found, fields(info, n.Type.Params, "parameter", n)...)
				found = append(found, fields(info, n.Type.Results, "parameter", n)...)
			}
		case *ast.FuncLit:
			found = append(found, fields(info, n.Type.Params, "parameter", n)...)
			found = append(found, fields(info, n.Type.Results, "parameter", n)...)
		case *ast.TypeSwitchStmt:
			if assign, ok := n.Assign.(*ast.AssignStmt); ok && len(assign.Lhs) == 1 {
				id, _ := assign.Lhs[0].(*ast.Ident)
				var objects []types.Object
				for _, clause := range n.Body.List {
					if obj := info.Implicits[clause]; obj != nil {
						objects = append(objects, obj)
					}
				}
				if id != nil && id.Name != "_" && len(objects) > 0 {
					found = append(found, declared{"local", id, objects, n, enclosingFunc(stack)})
				}
			}
		case *ast.Ident:
			obj := info.Defs[n]
			if obj == nil || n.Name == "_" {
				return true
			}
			fn := enclosingFunc(stack)
			if fn == nil {
				return true
			}
			switch o := obj.(type) {
			case *types.Var:
				if o.IsField() || isParam(stack) {
					return true
				}
			case *types.Const:
			default:
				return true
			}
			found = append(found, declared{"local", n, []types.Object{obj}, scopeNode(stack, fn), fn})
		}
		return true
	})
	for _, d := range found {
		if why := check(d, f, info, errs, fset); why != "" {
			line.Skipped[why]++
			continue
		}
		start := offset(d.ident.Pos())
		locations := []int{}
		other := false
		for _, o := range d.objects {
			for _, id := range uses[o] {
				if fset.File(id.Pos()) != tf {
					other = true
				} else if id != d.ident {
					locations = append(locations, offset(id.Pos()))
				}
			}
		}
		if other {
			line.Skipped["another file"]++
			continue
		}
		sort.Ints(locations)
		if len(locations) > 0 && locations[0] < start {
			line.Skipped["a use before the declaration"]++
			continue
		}
		line.Candidates = append(line.Candidates, candidate{d.kind, d.ident.Name, start, locations})
	}
	sort.Slice(line.Candidates, func(i, j int) bool { return line.Candidates[i].Start < line.Candidates[j].Start })
	return line
}

func fields(info *types.Info, list *ast.FieldList, kind string, fn ast.Node) []declared {
	var out []declared
	if list == nil {
		return out
	}
	for _, field := range list.List {
		for _, id := range field.Names {
			if obj := info.Defs[id]; obj != nil && id.Name != "_" {
				out = append(out, declared{kind, id, []types.Object{obj}, fn, fn})
			}
		}
	}
	return out
}

func enclosingFunc(stack []ast.Node) ast.Node {
	for i := len(stack) - 1; i >= 0; i-- {
		switch stack[i].(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			return stack[i]
		}
	}
	return nil
}

func isParam(stack []ast.Node) bool {
	// the identifier (last) is a name of a Field of a function type's list (parameters, results, a receiver)
	if len(stack) < 3 {
		return false
	}
	_, isField := stack[len(stack)-2].(*ast.Field)
	_, inList := stack[len(stack)-3].(*ast.FieldList)
	return isField && inList
}

func scopeNode(stack []ast.Node, fn ast.Node) ast.Node {
	// a local's block (the innermost statement list or statement around its declaration); its function at most
	for i := len(stack) - 2; i >= 0; i-- {
		switch stack[i].(type) {
		case *ast.BlockStmt, *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt,
			*ast.CaseClause, *ast.CommClause, *ast.SelectStmt:
			return stack[i]
		}
		if stack[i] == fn {
			return fn
		}
	}
	return fn
}

func check(d declared, f *ast.File, info *types.Info, errs []types.Error, fset *token.FileSet) string {
	for _, e := range errs {
		if e.Fset == fset && d.fn.Pos() <= e.Pos && e.Pos < d.fn.End() {
			return "a type error in the function"
		}
	}
	unresolved := false
	ast.Inspect(d.scope, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			ast.Inspect(n.X, func(m ast.Node) bool { // the selected name is never a variable
				if id, ok := m.(*ast.Ident); ok && id.Name == d.ident.Name && info.Uses[id] == nil && info.Defs[id] == nil {
					unresolved = true
				}
				return true
			})
			return false
		case *ast.Ident:
			if n.Name == d.ident.Name && info.Uses[n] == nil && info.Defs[n] == nil && n != d.ident {
				unresolved = true
			}
		}
		return true
	})
	if unresolved {
		return "an identifier of that name resolved to nothing"
	}
	return ""
}
