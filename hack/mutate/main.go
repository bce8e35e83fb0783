// Command mutate breaks the rules of one package one at a time and runs
// its tests against each break: a comparison flipped (< and <=, == and !=,
// && and ||), a negation dropped, a boolean constant turned over. A break
// the tests still pass is a rule no test pins. The files are never written:
// each break is handed to go test through -overlay.
//
//	go run ./hack/mutate -pkg ./internal/payment internal/payment/refund.go > run.txt
//	go run ./hack/mutate -survivors run.txt internal/payment/refund.go  # the survivors again, after new tests
//
// It prints one line per break (KILLED, SURVIVED, or INVALID when the break
// does not compile), then the totals. Some survivors change nothing a
// caller can see (x > 0 and x >= 0 where x is never 0); the rest want a test.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// mutant is one break: Old replaced by New at byte Off of File.
type mutant struct {
	File, Func, Old, New string
	Off, Line            int
}

func (m mutant) String() string {
	return fmt.Sprintf("%s:%d %s %q->%q", filepath.Base(m.File), m.Line, m.Func, m.Old, m.New)
}

var flipped = map[token.Token]string{
	token.LSS: "<=", token.LEQ: "<", token.GTR: ">=", token.GEQ: ">",
	token.EQL: "!=", token.NEQ: "==", token.LAND: "||", token.LOR: "&&",
}

func main() {
	pkg := flag.String("pkg", "./internal/payment", "the package whose tests run")
	workers := flag.Int("j", 2, "breaks tested at once")
	timeout := flag.Duration("timeout", 2*time.Minute, "the most one break's test run may take")
	only := flag.String("func", "", "comma-separated functions to break (all when empty)")
	again := flag.String("survivors", "", "a previous run's output: break again only what it lists SURVIVED")
	flag.Parse()
	var ms []mutant
	for _, f := range flag.Args() {
		found, err := mutants(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(2)
		}
		ms = append(ms, found...)
	}
	ms = inFuncs(ms, *only)
	if *again != "" {
		var err error
		if ms, err = survivors(ms, *again); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(2)
		}
	}
	fmt.Fprintf(os.Stderr, "%d breaks\n", len(ms))
	results, err := run(ms, *pkg, *workers, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	totals(results)
}

// mutants lists the breaks of one file's functions.
func mutants(path string) ([]mutant, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, abs, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []mutant
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		add := func(pos token.Pos, old, new string) {
			p := fset.Position(pos)
			out = append(out, mutant{File: abs, Func: fd.Name.Name, Old: old, New: new, Off: p.Offset, Line: p.Line})
		}
		ast.Inspect(fd, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if to, ok := flipped[x.Op]; ok {
					add(x.OpPos, x.Op.String(), to)
				}
			case *ast.UnaryExpr:
				if x.Op == token.NOT {
					add(x.OpPos, "!", " ")
				}
			case *ast.Ident:
				switch x.Name {
				case "true":
					add(x.Pos(), "true", "false")
				case "false":
					add(x.Pos(), "false", "true")
				}
			}
			return true
		})
	}
	return out, nil
}

func inFuncs(ms []mutant, only string) []mutant {
	if only == "" {
		return ms
	}
	want := map[string]bool{}
	for _, f := range strings.Split(only, ",") {
		want[f] = true
	}
	var kept []mutant
	for _, m := range ms {
		if want[m.Func] {
			kept = append(kept, m)
		}
	}
	return kept
}

// survivors keeps the breaks a previous run's output lists SURVIVED.
func survivors(ms []mutant, path string) ([]mutant, error) {
	out, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "SURVIVED "); ok {
			listed[rest] = true
		}
	}
	var kept []mutant
	for _, m := range ms {
		if listed[m.String()] {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

// run tests every break with workers at once, printing each result.
func run(ms []mutant, pkg string, workers int, timeout time.Duration) ([]string, error) {
	dir, err := os.MkdirTemp("", "mutate")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	results := make([]string, len(ms))
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range next {
				res := try(ms[i], i, dir, pkg, timeout)
				mu.Lock()
				results[i] = res
				fmt.Println(res, ms[i])
				mu.Unlock()
			}
		})
	}
	for i := range ms {
		next <- i
	}
	close(next)
	wg.Wait()
	return results, nil
}

// try runs pkg's tests with break m in place of its file.
func try(m mutant, i int, dir, pkg string, timeout time.Duration) string {
	src, err := os.ReadFile(m.File)
	if err != nil || !bytes.HasPrefix(src[m.Off:], []byte(m.Old)) {
		return "INVALID"
	}
	broken := filepath.Join(dir, fmt.Sprintf("m%d.go", i))
	overlay := filepath.Join(dir, fmt.Sprintf("m%d.json", i))
	body := append(append(append([]byte{}, src[:m.Off]...), m.New...), src[m.Off+len(m.Old):]...)
	spec, _ := json.Marshal(map[string]map[string]string{"Replace": {m.File: broken}})
	if os.WriteFile(broken, body, 0o600) != nil || os.WriteFile(overlay, spec, 0o600) != nil {
		return "INVALID"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-failfast", "-vet=off", "-overlay="+overlay, pkg)
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "SURVIVED"
	case ctx.Err() != nil:
		return "TIMEOUT"
	case bytes.Contains(out, []byte("build failed")) || bytes.Contains(out, []byte("setup failed")):
		return "INVALID"
	}
	return "KILLED"
}

func totals(results []string) {
	n := map[string]int{}
	for _, r := range results {
		n[r]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("# %s %d\n", k, n[k])
	}
}
