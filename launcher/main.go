// Command virtplane-launcher manages one QEMU domain through libvirt for one
// virtual machine instance (KubeVirt's virt-launcher). The node agent starts
// it through hashicorp/go-plugin (`serve`, the default) and reattaches to it
// after restarts; libvirtd owns QEMU, so neither a launcher nor an agent
// crash stops the guest. `probe`, `list-domains` and `version` are one-shot
// helpers the pure-Go node agent runs through os/exec.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var code int
	switch cmd {
	case "serve":
		code = serve(args)
	case "probe":
		code = probe(args)
	case "list-domains":
		code = listDomains(args)
	case "version":
		fmt.Println(version)
	default:
		fmt.Fprintf(os.Stderr, "virtplane-launcher: unknown command %q (serve, probe, list-domains or version)\n", cmd)
		code = 2
	}
	os.Exit(code)
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
