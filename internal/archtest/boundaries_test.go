// Package archtest holds the dependency rules of docs/architecture.md
// ("arrows are imports, and only point down or sideways") as a test, so
// that a new import that breaks one fails go test ./... and names the
// importer, the imported package and the rule.
//
// The rules are checked on the imports of non-test files, of the default
// build and of -tags libvirt (the launcher's cgo files) together: that is
// the code the programs are made of. Tests may import upward (a store
// client's test runs a real API server, the provider's acceptance tests
// an agent in process), so the layer and ancestor rules leave test
// imports alone; the forbidden pairs below also hold for what tests
// import, since none of them has a reason to.
package archtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// A pattern is a package path relative to the module ("internal/store"),
// a subtree ("internal/controller/...": that package and every one below
// it), or a naming convention (".../*test": a package whose name ends in
// test, like storetest or drivertest; ".../fake"). The most specific
// pattern that matches a package decides: the exact path, then the
// convention, then the longest subtree.

// layers is the order of the tree, bottom first: a package may import
// its own layer (sideways) and those below, never one above. Every
// package of the module must be in one.
var layers = []struct {
	name     string
	patterns []string
}{
	{"API types", []string{"internal/api/v1", "internal/api/migrationdest"}},
	{"validation", []string{"internal/api/validation"}},
	{"libraries", []string{"internal/fsutil", "internal/pki", "internal/cloudinit", "internal/termraw", "internal/procfs",
		"internal/hostns", "internal/guestnet", "internal/macaddr", "internal/vmlifecycle", "internal/imagestore", "internal/imagepolicy", "internal/ceph", "internal/firmware",
		"internal/backup/repo/...",
		"internal/backup/target",
		"internal/adopt",
		"internal/nsquota",
		"internal/audit",
		"internal/launcher/launcherpb"}},
	{"store and clients", []string{"internal/store/...", "internal/etcdserver/...", "internal/client/...", "internal/imagewait",
		"internal/launcher/..."}},
	{"store users", []string{"internal/informer", "internal/eviction", "internal/leader"}},
	{"controller framework", []string{"internal/controller"}},
	{"controllers, node-agent roles, launcher and provider internals", []string{"internal/controller/...",
		"internal/nodeagent/...", "launcher/internal/...", "provider/internal/..."}},
	{"API server and node agent", []string{"internal/apiserver/...", "internal/nodeagent"}},
	{"composition root", []string{"agent/server/..."}},
	{"CLI", []string{"agent/command/..."}},
	{"programs", []string{"agent", "launcher", "provider"}},
	// Test support: helpers, fakes, the test guest and harnesses. Above
	// every production layer, so no program links it.
	{"test support", []string{"internal/testutil/...", "internal/testguest/...", "internal/fakenode/...", "internal/e2e/...",
		"internal/store/memstore", ".../*test", ".../fake"}},
	// The benchmark is a tool built on test support (it runs agents as
	// the harness does, with testutil/proc): it may import test support,
	// test support never imports it.
	{"tools", []string{"internal/bench/..."}},
}

// sharedParents are the packages whose subpackages may import them: a
// library of its subtree. Any other ancestor composes its subpackages
// (internal/nodeagent runs its roles) or sits above them, and a
// subpackage never imports it. A command, X/cmd/NAME, may import X too:
// it is X's program (virtplane-bench, build-guest, demo-cluster). Each
// value is what the subtree shares, for the reader: the ancestor rule's
// message names the packages only, to stay short.
var sharedParents = map[string]string{
	"internal/controller": "the framework (runner, expectations, caches) its controllers share",
	"internal/store":      "the Store its subpackages implement (memstore) and test (storetest)",
	"internal/launcher":   "the launcher protocol's client side, which its fake implements",
}

// forbidden are pairs that must never be linked, directly or through
// other packages, by code or by tests.
var forbidden = []struct {
	from, to []string
	rule     string
}{
	{[]string{"internal/controller/..."}, []string{"internal/nodeagent/..."},
		"controllers never import the node agent: they decide from the store what runs where, and node agents act on it through the API"},
	{[]string{"launcher/...", "internal/launcher/..."}, []string{"internal/nodeagent/..."},
		"the launcher never imports the node agent: it serves one domain to the node agent that started it, over go-plugin"},
	{[]string{"launcher/...", "internal/launcher/..."}, []string{"internal/store/..."},
		"the launcher never imports the store: it knows the one VMI the node agent hands it, not the cluster's state"},
	{[]string{"internal/testutil/..."}, []string{"internal/bench/..."},
		"test support never imports the benchmark: the benchmark is a tool built on test support"},
}

// providerAllowed is all the shipped provider may link of this module
// besides provider/...: it talks to the agent only through the API. The
// provider rule's message lists each with why.
var providerAllowed = map[string]string{
	"internal/api/v1":         "the API's messages and services",
	"internal/api/validation": "the API's own defaulting and field checks, run at plan time so that errors show before apply",
	"internal/client":         "the API client",
	"internal/imagewait":      "waiting for an Image to be pulled, shared with the CLI: client side (it imports only the client and the API)",
	"internal/pki":            "through the client: the CA and certificates of its TLS",
	"internal/fsutil":         "through pki: reading and writing key files",

	"internal/api/migrationdest": "through validation: the rule for a migration destination, which the API's checks apply",
}

// TestBoundaries checks the rules once, on the default build's and the
// libvirt build's imports together, so a violation in code both builds
// share is reported once.
func TestBoundaries(t *testing.T) {
	g := union(loadGraph(t, ""), loadGraph(t, "libvirt"))
	for _, v := range check(g) {
		t.Error(v)
	}
}

// check is every violation of the rules in g, one message each, sorted.
func check(g graph) []string {
	seen := map[string]bool{}
	for path := range g {
		for _, v := range slices.Concat(checkLayers(g, path), checkAncestors(g, path), checkForbidden(g, path), checkProvider(g, path)) {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func checkLayers(g graph, path string) []string {
	from, ok := layerOf(path)
	if !ok {
		return []string{fmt.Sprintf("%s is in no layer: add it to the layers of internal/archtest where it belongs", path)}
	}
	var out []string
	for _, imp := range g[path].Imports {
		to, ok := layerOf(imp)
		if ok && to > from {
			out = append(out, fmt.Sprintf("%s (layer %q) imports %s (layer %q, above it): imports only point down or sideways",
				path, layers[from].name, imp, layers[to].name))
		}
	}
	return out
}

func checkAncestors(g graph, path string) []string {
	var out []string
	for _, imp := range g[path].Imports {
		if _, shared := sharedParents[imp]; shared || !isAncestor(imp, path) || isAncestor(imp+"/cmd", path) {
			continue
		}
		out = append(out, fmt.Sprintf("%s imports %s, its ancestor: a package never imports its parents, except the shared libraries of their subtree (%s) and a command its package",
			path, imp, strings.Join(slices.Sorted(maps.Keys(sharedParents)), ", ")))
	}
	return out
}

func checkForbidden(g graph, path string) []string {
	var out []string
	for _, f := range forbidden {
		if !matchesAny(f.from, path) {
			continue
		}
		inScope := func(p string) bool { return matchesAny(f.from, p) }
		bad := func(p string) bool { return matchesAny(f.to, p) }
		for _, chain := range reached(g, path, true, inScope, bad) {
			out = append(out, fmt.Sprintf("%s imports %s (%s): %s", chain[0], chain[len(chain)-1], strings.Join(chain, " → "), f.rule))
		}
	}
	return out
}

func checkProvider(g graph, path string) []string {
	inScope := func(p string) bool { return matches("provider/...", p) && !isTestSupport(p) }
	if !inScope(path) {
		return nil
	}
	bad := func(p string) bool { _, ok := providerAllowed[p]; return !ok && !matches("provider/...", p) }
	var allowed strings.Builder
	for _, p := range slices.Sorted(maps.Keys(providerAllowed)) {
		fmt.Fprintf(&allowed, "\n  %s (%s)", p, providerAllowed[p])
	}
	var out []string
	for _, chain := range reached(g, path, false, inScope, bad) {
		out = append(out, fmt.Sprintf("%s imports %s (%s): the provider links only the API and its client:%s",
			chain[0], chain[len(chain)-1], strings.Join(chain, " → "), allowed.String()))
	}
	return out
}

// reached is the chains of imports from path (with tests, also through
// what its tests import) to each bad package it reaches, cut to what
// names the culprit: only the first bad package on a chain
// (internal/nodeagent, not all it imports), and starting at the last
// package in the rule's scope (the controller that imports it, not each
// controller whose tests import that one).
func reached(g graph, path string, tests bool, inScope, bad func(string) bool) [][]string {
	var out [][]string
	for to, chain := range g.reach(path, tests) {
		inner := chain[1 : len(chain)-1]
		if !bad(to) || slices.ContainsFunc(inner, bad) {
			continue
		}
		k := 0
		for i, p := range inner {
			if inScope(p) {
				k = i + 1
			}
		}
		out = append(out, chain[k:])
	}
	return out
}

// layerOf is the index in layers of the most specific pattern matching
// path.
func layerOf(path string) (int, bool) {
	best, layer := 0, -1
	for i, l := range layers {
		for _, p := range l.patterns {
			if s := specificity(p, path); s > best {
				best, layer = s, i
			}
		}
	}
	return layer, layer >= 0
}

func isTestSupport(path string) bool {
	l, ok := layerOf(path)
	return ok && layers[l].name == "test support"
}

// specificity is how closely pattern matches path, 0 when it does not:
// the exact path beats a naming convention, which beats any subtree; a
// longer subtree beats a shorter one.
func specificity(pattern, path string) int {
	const exact, convention = 1 << 20, 1 << 19
	last := path[strings.LastIndex(path, "/")+1:]
	switch {
	case pattern == path:
		return exact
	case pattern == ".../*test":
		if strings.HasSuffix(last, "test") && last != "test" {
			return convention
		}
	case pattern == ".../fake":
		if last == "fake" {
			return convention
		}
	case strings.HasSuffix(pattern, "/..."):
		if root := strings.TrimSuffix(pattern, "/..."); path == root || isAncestor(root, path) {
			return 1 + len(root)
		}
	}
	return 0
}

func matches(pattern, path string) bool { return specificity(pattern, path) > 0 }

func matchesAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, path) })
}

// isAncestor reports whether a is a parent directory of path.
func isAncestor(a, path string) bool { return strings.HasPrefix(path, a+"/") }
