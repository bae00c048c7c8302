package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// ProbeInfo is what `virtplane-launcher probe` prints.
type ProbeInfo struct {
	LibvirtVersion string `json:"libvirt_version"`
	QemuVersion    string `json:"qemu_version"`
	Hostname       string `json:"hostname"`
}

// DomainInfo is one element of `virtplane-launcher list-domains`.
type DomainInfo struct {
	Name         string `json:"name"`
	UUID         string `json:"uuid"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	VMIUID       string `json:"vmi_uid"`
	VMINamespace string `json:"vmi_namespace"`
	VMIName      string `json:"vmi_name"`
}

// LauncherTools are the launcher binary's one-shot commands, which the
// agent needs without a launcher process (and without linking libvirt).
type LauncherTools interface {
	Probe(ctx context.Context, libvirtURI string) (ProbeInfo, error)
	// ListDomains lists the domains virtplane defined on the host.
	ListDomains(ctx context.Context, libvirtURI string) ([]DomainInfo, error)
}

// ExecTools runs the launcher binary at Path ("virtplane-launcher" from
// PATH when empty).
type ExecTools struct {
	Path string
}

var _ LauncherTools = ExecTools{}

func (t ExecTools) Probe(ctx context.Context, uri string) (ProbeInfo, error) {
	var out ProbeInfo
	err := t.run(ctx, &out, "probe", "--libvirt-uri", uri)
	return out, err
}

func (t ExecTools) ListDomains(ctx context.Context, uri string) ([]DomainInfo, error) {
	var out []DomainInfo
	err := t.run(ctx, &out, "list-domains", "--libvirt-uri", uri)
	return out, err
}

func (t ExecTools) run(ctx context.Context, into any, args ...string) error {
	path := t.Path
	if path == "" {
		path = "virtplane-launcher"
	}
	stdout, err := runCommand(ctx, path, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(stdout, into); err != nil {
		return fmt.Errorf("%s %s: decoding output: %w", path, args[0], err)
	}
	return nil
}

// runCommand runs a command from an argument list (never a shell) and
// returns its stdout; a failure carries its stderr, which is where the
// tools explain themselves.
func runCommand(ctx context.Context, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return nil, fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), err)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}
