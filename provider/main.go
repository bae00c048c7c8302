// Command terraform-provider-virtplane is the Terraform provider for
// virtplane (registry.terraform.io/virtplane/virtplane).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/virtplane/terraform-provider-virtplane/provider/internal/provider"
)

// version is set by the build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/virtplane/virtplane",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
