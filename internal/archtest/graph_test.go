package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/virtplane/terraform-provider-virtplane"

// pkg is one package of this module with its imports of this module,
// all by paths relative to it ("internal/store").
type pkg struct {
	Imports []string // what its non-test files import
	Tests   []string // what its _test.go files import (internal and external tests)
}

// graph is the module's packages by their paths relative to it.
type graph map[string]*pkg

// loadGraph lists the module's packages with one go list call for the
// build tags. CGO_ENABLED=1 so that the cgo files of the libvirt tag are
// listed even where the default would leave cgo off; go list does not
// compile them, so no libvirt headers are needed.
func loadGraph(t *testing.T, tags string) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", tags, "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr.String())
	}
	g, err := decodeGraph(out)
	if err != nil {
		t.Fatalf("go list -tags %q: %v", tags, err)
	}
	return g
}

// decodeGraph reads go list -json's stream of objects.
func decodeGraph(b []byte) (graph, error) {
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding: %w", err)
		}
		if p.ImportPath == module {
			return nil, errors.New("a package at the module's root: the rules name packages by their path below it")
		}
		path, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		g[path] = &pkg{Imports: ours(p.Imports), Tests: ours(append(p.TestImports, p.XTestImports...))}
	}
	if len(g) == 0 {
		return nil, errors.New("no package of " + module)
	}
	return g, nil
}

// rel is path relative to the module, false for other modules' packages
// (and for the module's root, which holds none: decodeGraph fails on it).
func rel(path string) (string, bool) { return strings.CutPrefix(path, module+"/") }

// ours keeps the imports of this module, relative to it.
func ours(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if r, ok := rel(imp); ok {
			out = append(out, r)
		}
	}
	return out
}

// union is the packages of gs, each with every import it has in any of
// them: the builds of several tag sets as one graph.
func union(gs ...graph) graph {
	out := graph{}
	for _, g := range gs {
		for path, p := range g {
			q := out[path]
			if q == nil {
				q = &pkg{}
				out[path] = q
			}
			q.Imports = merged(q.Imports, p.Imports)
			q.Tests = merged(q.Tests, p.Tests)
		}
	}
	return out
}

// merged is the sorted union of a and b.
func merged(a, b []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(slices.Concat(a, b))))
}

// reach is every package from reaches through imports, each with the
// chain of imports that leads to it from from (from first): its non-test
// imports, and with tests also what its tests import and all that
// reaches.
func (g graph) reach(from string, tests bool) map[string][]string {
	p := g[from]
	if p == nil {
		return nil
	}
	via := map[string][]string{}
	var queue []string
	visit := func(path string, chain []string) {
		if _, seen := via[path]; seen || path == from {
			return
		}
		via[path] = append(append([]string(nil), chain...), path)
		queue = append(queue, path)
	}
	for _, imp := range p.Imports {
		visit(imp, []string{from})
	}
	if tests {
		for _, imp := range p.Tests {
			visit(imp, []string{from + " (tests)"})
		}
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if q := g[cur]; q != nil {
			for _, imp := range q.Imports {
				visit(imp, via[cur])
			}
		}
	}
	return via
}
