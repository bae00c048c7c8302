// Command virtplane-launcher manages one QEMU domain through libvirt for one
// virtual machine instance (KubeVirt's virt-launcher). The node agent starts
// it through hashicorp/go-plugin (`serve`, the default) and reattaches to it
// after restarts; libvirtd owns QEMU, so neither a launcher nor an agent
// crash stops the guest. `probe`, `list-domains`, `list-networks`,
// `inspect-domain` and `version` are one-shot helpers the pure-Go node
// agent runs through os/exec.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// commands are the subcommands that need libvirt.
var commands = map[string]func(args []string) int{
	"serve":         serve,
	"probe":         probe,
	"list-domains":  listDomains,
	"list-networks": listNetworks,
	// docs/adopt.md: a domain virtplane did not define, for the node
	// agent to map.
	"inspect-domain": inspectDomain,
}

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd == "version" {
		fmt.Println(version)
		return
	}
	run, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(os.Stderr, "virtplane-launcher: unknown command %q (serve, probe, list-domains, list-networks, inspect-domain or version)\n", cmd)
		os.Exit(2)
	}
	// Before anything else: the node agent shows a failed launcher's
	// stderr (it goes to the launcher log), so this is what it reports.
	if !withLibvirt {
		fmt.Fprintf(os.Stderr, "virtplane-launcher %s: %v\n", cmd, errNoLibvirt)
		os.Exit(1)
	}
	os.Exit(run(args))
}

// envOr returns the environment variable key, or def.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// defaultURI is the libvirt URI when --libvirt-uri is not given.
func defaultURI() string { return envOr("VIRTPLANE_LIBVIRT_URI", launcher.DefaultLibvirtURI) }
