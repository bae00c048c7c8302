package nodeagent

import (
	"context"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// LauncherTools are the launcher binary's one-shot commands, which the
// agent needs without a launcher process (and without linking libvirt).
// ExecTools is the real one; tests substitute a fake.
type LauncherTools interface {
	Probe(ctx context.Context, libvirtURI string) (launcher.ProbeResult, error)
	// ListDomains lists the domains virtplane defined on the host.
	ListDomains(ctx context.Context, libvirtURI string) ([]launcher.DomainInfo, error)
	// ListNetworks lists the active libvirt networks, for the node's
	// network inventory.
	ListNetworks(ctx context.Context, libvirtURI string) ([]launcher.NetworkInfo, error)
}

// ExecTools runs `virtplane-launcher probe|list-domains|list-networks` at Path
// ("virtplane-launcher" from PATH when empty) through internal/launcher,
// which owns the commands' output format.
type ExecTools struct {
	Path string
}

var _ LauncherTools = ExecTools{}

func (t ExecTools) path() string {
	if t.Path == "" {
		return "virtplane-launcher"
	}
	return t.Path
}

func (t ExecTools) Probe(ctx context.Context, uri string) (launcher.ProbeResult, error) {
	return launcher.Probe(ctx, t.path(), uri)
}

func (t ExecTools) ListDomains(ctx context.Context, uri string) ([]launcher.DomainInfo, error) {
	return launcher.ListDomains(ctx, t.path(), uri)
}

func (t ExecTools) ListNetworks(ctx context.Context, uri string) ([]launcher.NetworkInfo, error) {
	return launcher.ListNetworks(ctx, t.path(), uri)
}
