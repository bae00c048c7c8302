package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

func TestReadHostFacts(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/meminfo":              "MemTotal:       16318464 kB\nMemFree:         1000 kB\n",
		"proc/cpuinfo":              "processor\t: 0\nflags\t\t: fpu vme de pse vmx sse\n\nprocessor\t: 1\nflags\t\t: fpu vmx\n",
		"proc/sys/kernel/osrelease": "6.1.0-18-amd64\n",
		"dev/kvm":                   "",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ReadHostFacts(root)
	if err != nil {
		t.Fatal(err)
	}
	if h.MemoryBytes != 16318464*1024 || h.KernelVersion != "6.1.0-18-amd64" || !h.KVMUsable || h.CPUs < 1 || h.Architecture == "" {
		t.Fatalf("facts %+v", h)
	}

	// Flags without /dev/kvm, and /dev/kvm without the flags: no KVM.
	os.Remove(filepath.Join(root, "dev/kvm"))
	if h, _ := ReadHostFacts(root); h.KVMUsable {
		t.Error("KVM usable without /dev/kvm")
	}
	writeFile(t, filepath.Join(root, "dev/kvm"))
	os.WriteFile(filepath.Join(root, "proc/cpuinfo"), []byte("flags\t: fpu sse\n"), 0o644)
	if h, _ := ReadHostFacts(root); h.KVMUsable {
		t.Error("KVM usable without vmx/svm")
	}
	os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemFree: 1 kB\n"), 0o644)
	if _, err := ReadHostFacts(root); err == nil {
		t.Error("meminfo without MemTotal accepted")
	}
}

func TestExecToolsDecodeOutput(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "virtplane-launcher")
	body := `#!/bin/sh
case "$1" in
probe) [ "$2" = --libvirt-uri ] && [ "$3" = "test:///default" ] && echo '{"libvirt_version":"10.0.0","qemu_version":"8.2.0","hostname":"h"}' ;;
list-domains) echo '[{"name":"default_a","uuid":"u","state":"Running","reason":"Booted","vmi_uid":"x","vmi_namespace":"default","vmi_name":"a"}]' ;;
list-networks) [ "$3" = "test:///default" ] && echo '[{"name":"default","bridge":"virbr0"},{"name":"lan"}]' ;;
*) echo "unknown command $1" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := ExecTools{Path: script}
	ctx := context.Background()
	p, err := tools.Probe(ctx, "test:///default")
	if err != nil || p.LibvirtVersion != "10.0.0" || p.QEMUVersion != "8.2.0" {
		t.Fatalf("probe %+v, %v", p, err)
	}
	doms, err := tools.ListDomains(ctx, "test:///default")
	if err != nil || len(doms) != 1 || doms[0].VMIName != "a" || doms[0].VMIUID != "x" {
		t.Fatalf("list-domains %+v, %v", doms, err)
	}
	nets, err := tools.ListNetworks(ctx, "test:///default")
	if err != nil || len(nets) != 2 || nets[0] != (launcher.NetworkInfo{Name: "default", Bridge: "virbr0"}) || nets[1].Name != "lan" {
		t.Fatalf("list-networks %+v, %v", nets, err)
	}
	if _, err := (ExecTools{Path: filepath.Join(dir, "missing")}).Probe(ctx, "x"); err == nil {
		t.Fatal("missing binary: no error")
	}
}

func TestNewValidatesOptions(t *testing.T) {
	h := newHarness(t)
	for name, mod := range map[string]func(*Options){
		"no node name":       func(o *Options) { o.NodeName = "" },
		"no API":             func(o *Options) { o.API = API{} },
		"no VM service":      func(o *Options) { o.API.VMs = nil },
		"no launchers":       func(o *Options) { o.Launchers = nil },
		"no data dir":        func(o *Options) { o.NodeDataDir = "" },
		"relative image dir": func(o *Options) { o.ImageDir = "images" },
	} {
		o := h.options()
		mod(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Without a State the bolt database is opened in the node data dir.
	o := h.options()
	o.State = nil
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := os.Stat(h.layout().StateDBPath()); err != nil {
		t.Fatal(err)
	}
}
