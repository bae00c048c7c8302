package archtest

import (
	"slices"
	"strings"
	"testing"
)

// The rules catch each kind of violation in a made-up tree, once and at
// the package that makes it, and let what the tree does on purpose
// through: roles importing shared node-agent packages, controllers their
// framework, a command its package, tests importing upward.
func TestRulesCatchViolations(t *testing.T) {
	g := graph{}
	add := func(path string, imports []string, tests ...string) {
		g[path] = &pkg{Imports: imports, Tests: tests}
	}
	add("internal/api/v1", nil)
	add("internal/api/validation", []string{"internal/api/v1", "internal/store"}) // upward
	add("internal/store", []string{"internal/api/v1"})
	add("internal/store/storetest", []string{"internal/store"})
	add("internal/client", []string{"internal/api/v1", "internal/pki"})
	add("internal/pki", nil, "internal/testutil") // a test may import test support
	add("internal/controller", nil)
	add("internal/controller/vm", []string{"internal/controller", "internal/nodeagent/migration"}, "internal/apiserver") // a test may import upward
	add("internal/controller/pool", []string{"internal/controller"}, "internal/controller/vm")
	add("internal/apiserver", []string{"internal/store"})
	add("internal/nodeagent", []string{"internal/nodeagent/migration", "internal/nodeagent/state"})
	add("internal/nodeagent/state", nil)
	add("internal/nodeagent/migration", []string{"internal/nodeagent/state", "internal/nodeagent"}) // its parent
	add("launcher/internal/driver", nil, "internal/store/storetest")                                // through a test
	add("launcher", []string{"internal/nodeagent/state"})
	add("internal/launcher", []string{"internal/store"}) // a layer it shares: only the forbidden pair catches it
	add("provider", []string{"provider/internal/provider"})
	add("provider/internal/provider", []string{"internal/client", "internal/apiserver"})
	add("provider/internal/acctest", []string{"internal/apiserver"}) // test support, not shipped
	add("internal/testutil", nil)
	add("internal/testutil/cluster", []string{"internal/testutil/proc"}, "internal/bench")
	add("internal/testutil/proc", nil)
	add("internal/bench", []string{"internal/testutil/proc"})
	add("internal/bench/cmd/virtplane-bench", []string{"internal/bench"})
	add("internal/newthing", nil)

	want := []string{
		`internal/api/validation (layer "validation") imports internal/store (layer "store and clients", above it): imports only point down or sideways`,
		`internal/controller/vm imports internal/nodeagent/migration (internal/controller/vm → internal/nodeagent/migration): controllers never import the node agent`,
		`internal/newthing is in no layer`,
		`internal/nodeagent/migration (layer "controllers, node-agent roles, launcher and provider internals") imports internal/nodeagent (layer "API server and node agent", above it)`,
		`internal/nodeagent/migration imports internal/nodeagent, its ancestor`,
		`launcher imports internal/nodeagent/state (launcher → internal/nodeagent/state): the launcher never imports the node agent`,
		`internal/launcher imports internal/store (internal/launcher → internal/store): the launcher never imports the store`,
		`launcher/internal/driver (tests) imports internal/store/storetest (launcher/internal/driver (tests) → internal/store/storetest): the launcher never imports the store`,
		`internal/testutil/cluster (tests) imports internal/bench (internal/testutil/cluster (tests) → internal/bench): test support never imports the benchmark`,
		`provider/internal/provider (layer "controllers, node-agent roles, launcher and provider internals") imports internal/apiserver (layer "API server and node agent", above it)`,
		`provider/internal/provider imports internal/apiserver (provider/internal/provider → internal/apiserver): the provider links only the API and its client`,
	}
	got := check(g)
	for _, w := range want {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, w) }) {
			t.Errorf("no violation %q", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

func TestLayerOfTakesTheMostSpecificPattern(t *testing.T) {
	for path, want := range map[string]string{
		"internal/controller":                        "controller framework",
		"internal/controller/vm":                     "controllers, node-agent roles, launcher and provider internals",
		"internal/controller/controllertest":         "test support",
		"internal/nodeagent":                         "API server and node agent",
		"internal/nodeagent/snapshot":                "controllers, node-agent roles, launcher and provider internals",
		"internal/nodeagent/console/consoletest":     "test support",
		"internal/launcher":                          "store and clients",
		"internal/launcher/launcherpb":               "libraries",
		"internal/launcher/fake":                     "test support",
		"internal/store/memstore":                    "test support",
		"internal/testutil/cluster/cmd/demo-cluster": "test support",
		"internal/bench/cmd/virtplane-bench":         "tools",
		"provider/internal/acctest":                  "test support",
	} {
		if l, ok := layerOf(path); !ok || layers[l].name != want {
			t.Errorf("layer of %s = %d, %v; want %q", path, l, ok, want)
		}
	}
	if l, ok := layerOf("internal/test"); ok {
		t.Errorf("internal/test is in layer %q; only a name ending in test, not test itself, is the convention", layers[l].name)
	}
}

// The builds of two tag sets make one graph, which check reads once: a
// package has the imports of both, each once.
func TestUnionOfBuilds(t *testing.T) {
	def := graph{"internal/controller/vm": {Imports: []string{"internal/nodeagent"}}, "internal/nodeagent": {}}
	tagged := graph{
		"internal/controller/vm": {Imports: []string{"internal/launcher", "internal/nodeagent"}, Tests: []string{"internal/store"}},
		"internal/launcher":      {},
		"internal/nodeagent":     {},
	}
	g := union(def, tagged)
	if vm := g["internal/controller/vm"]; !slices.Equal(vm.Imports, []string{"internal/launcher", "internal/nodeagent"}) || !slices.Equal(vm.Tests, []string{"internal/store"}) {
		t.Errorf("internal/controller/vm imports %v, tests %v", vm.Imports, vm.Tests)
	}
	if len(g) != 3 {
		t.Errorf("%d packages, want 3", len(g))
	}
}
