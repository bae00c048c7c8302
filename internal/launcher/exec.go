package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// ProbeResult is what `virtplane-launcher probe` prints: the node facts the
// node agent (a pure-Go binary) cannot get without libvirt.
type ProbeResult struct {
	LibvirtURI      string `json:"libvirt_uri"`
	LibvirtVersion  string `json:"libvirt_version"`
	HypervisorType  string `json:"hypervisor_type"`
	QEMUVersion     string `json:"qemu_version"`
	Hostname        string `json:"hostname"`
	KVMUsable       bool   `json:"kvm_usable"`
	KVMReason       string `json:"kvm_reason,omitempty"`
	Architecture    string `json:"architecture"`
	KernelVersion   string `json:"kernel_version"`
	CPUs            int    `json:"cpus"`
	MemoryKiB       uint64 `json:"memory_kib"`
	LauncherVersion string `json:"launcher_version"`
}

// DomainInfo is one entry of `virtplane-launcher list-domains`: a libvirt
// domain carrying virtplane metadata, whether or not a launcher runs for
// it. The node agent uses it to find orphans after a crash.
type DomainInfo struct {
	Name                string `json:"name"`
	UUID                string `json:"uuid"`
	State               string `json:"state"`
	Reason              string `json:"reason"`
	VMIUID              string `json:"vmi_uid"`
	VMINamespace        string `json:"vmi_namespace"`
	VMIName             string `json:"vmi_name"`
	GracePeriodSeconds  int64  `json:"grace_period_seconds"`
	PausedByUser        bool   `json:"paused_by_user,omitempty"`
	ShutdownRequestedAt int64  `json:"shutdown_requested_at,omitempty"`
	QEMUPid             int    `json:"qemu_pid,omitempty"`
	// NodeFailurePolicy is what the domain metadata records (empty for a
	// domain defined before it was recorded, which counts as Wait).
	NodeFailurePolicy string `json:"node_failure_policy,omitempty"`
	// Node is the node the domain was defined for (empty for a domain
	// defined outside a node agent).
	Node string `json:"node,omitempty"`
}

// NetworkInfo is one entry of `virtplane-launcher list-networks`: an
// active libvirt network, by name, and the Linux bridge libvirt made for
// it (none for a network that forwards by macvtap or hostdev). The
// command prints a JSON array of them sorted by name, [] when there is
// none: [{"name":"default","bridge":"virbr0"}].
type NetworkInfo struct {
	Name   string `json:"name"`
	Bridge string `json:"bridge,omitempty"`
}

// Probe runs `launcherPath probe --libvirt-uri uri`.
func Probe(ctx context.Context, launcherPath, libvirtURI string) (ProbeResult, error) {
	var r ProbeResult
	err := runJSON(ctx, &r, launcherPath, "probe", "--libvirt-uri", uriOrDefault(libvirtURI))
	return r, err
}

// ListDomains runs `launcherPath list-domains --libvirt-uri uri`.
func ListDomains(ctx context.Context, launcherPath, libvirtURI string) ([]DomainInfo, error) {
	var ds []DomainInfo
	err := runJSON(ctx, &ds, launcherPath, "list-domains", "--libvirt-uri", uriOrDefault(libvirtURI))
	return ds, err
}

// ListNetworks runs `launcherPath list-networks --libvirt-uri uri`.
func ListNetworks(ctx context.Context, launcherPath, libvirtURI string) ([]NetworkInfo, error) {
	var ns []NetworkInfo
	err := runJSON(ctx, &ns, launcherPath, "list-networks", "--libvirt-uri", uriOrDefault(libvirtURI))
	return ns, err
}

// Version runs `launcherPath version`.
func Version(ctx context.Context, launcherPath string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, launcherPath, "version")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s version: %w", launcherPath, err)
	}
	return strings.TrimSpace(out.String()), nil
}

func uriOrDefault(uri string) string {
	if uri == "" {
		return DefaultLibvirtURI
	}
	return uri
}

func runJSON(ctx context.Context, v any, path string, args ...string) error {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// The launcher explains itself on stderr; a binary that could not
		// run at all says nothing there.
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%s %s: %w: %s", path, args[0], err, msg)
		}
		return fmt.Errorf("%s %s: %w", path, args[0], err)
	}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		return fmt.Errorf("%s %s: decode output: %w", path, args[0], err)
	}
	return nil
}
