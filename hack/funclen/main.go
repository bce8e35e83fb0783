// Command funclen fails when a function or method in the given directories'
// non-test Go files is longer than -max lines (from its signature to its
// closing brace). make verify runs it on controllers/: a reconciler reads,
// calls and writes in short steps, and its decisions live in
// internal/payment.
//
//	go run ./hack/funclen -max 80 controllers
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	max := flag.Int("max", 80, "the most lines a function may have")
	flag.Parse()
	long, err := tooLong(*max, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	for _, l := range long {
		fmt.Println(l)
	}
	if len(long) > 0 {
		os.Exit(1)
	}
}

// tooLong lists "file:line name (n lines)" for every function of dirs
// longer than max lines.
func tooLong(max int, dirs []string) ([]string, error) {
	var long []string
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
				if n := end.Line - start.Line + 1; n > max {
					long = append(long, fmt.Sprintf("%s:%d %s (%d lines)", name, start.Line, fd.Name.Name, n))
				}
			}
		}
	}
	return long, nil
}
