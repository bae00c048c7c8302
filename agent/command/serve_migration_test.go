package command

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	migctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/migration"
)

func parseMigrationFlags(args ...string) (migctl.Options, error) {
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var o migctl.Options
	addMigrationFlags(f, &o)
	return o, f.Parse(args)
}

func TestMigrationDestinationFlags(t *testing.T) {
	o, err := parseMigrationFlags()
	if err != nil || o.Destinations.Transport != migrationdest.TransportTLS || o.Destinations.Port != 0 || len(o.Destinations.Networks) != 0 {
		t.Fatalf("defaults: %+v, %v; want tls, the transport's port, any network", o.Destinations, err)
	}
	o, err = parseMigrationFlags("--migration-transport", "tcp", "--migration-libvirt-port", "16509",
		"--migration-networks", "169.254.0.0/16, fd00::/8", "--migration-networks", "10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	d := o.Destinations
	if d.Transport != "tcp" || d.Port != 16509 || (*prefixes)(&d.Networks).String() != "169.254.0.0/16,fd00::/8,10.0.0.0/8" {
		t.Fatalf("parsed %+v", d)
	}
	if _, err := parseMigrationFlags("--migration-networks", "10.0.0.300/8"); err == nil || !strings.Contains(err.Error(), "migration-networks") {
		t.Fatalf("a bad network: %v, want an error naming --migration-networks", err)
	}
	// Networks are read as every network flag reads them
	// (imagepolicy.ParsePrefix): host bits refused when the flag is
	// parsed, an IPv4-mapped network taken as the IPv4 one.
	if _, err := parseMigrationFlags("--migration-networks", "10.0.0.1/8"); err == nil ||
		!strings.Contains(err.Error(), "migration-networks") || !strings.Contains(err.Error(), "did you mean 10.0.0.0/8") {
		t.Fatalf("a network with host bits: %v, want it refused at the flag", err)
	}
	o, err = parseMigrationFlags("--migration-networks", "::ffff:169.254.0.0/112")
	if err != nil || (*prefixes)(&o.Destinations.Networks).String() != "169.254.0.0/16" {
		t.Fatalf("an IPv4-mapped network: %v, %v; want 169.254.0.0/16", o.Destinations.Networks, err)
	}
}
