package nodeagent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// HostFacts are what the node reports about its host.
type HostFacts struct {
	Hostname      string
	CPUs          int
	MemoryBytes   int64
	KVMUsable     bool
	KernelVersion string
	Architecture  string
}

// ReadHostFacts reads the facts of the host whose filesystem root is root
// ("/" normally; tests pass a directory laid out like it).
func ReadHostFacts(root string) (HostFacts, error) {
	h := HostFacts{CPUs: runtime.NumCPU(), Architecture: runtime.GOARCH}
	var err error
	if h.Hostname, err = os.Hostname(); err != nil {
		return h, fmt.Errorf("host name: %w", err)
	}
	if h.MemoryBytes, err = memTotal(filepath.Join(root, "proc/meminfo")); err != nil {
		return h, err
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease")); err == nil {
		h.KernelVersion = strings.TrimSpace(string(b))
	}
	h.KVMUsable = kvmUsable(root)
	return h, nil
}

// memTotal returns MemTotal from a /proc/meminfo, in bytes.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading memory size: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: MemTotal %q: %w", path, fields[1], err)
		}
		// The kernel's "kB" is KiB.
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has no MemTotal line", path)
}

// kvmUsable reports whether guests can use KVM: /dev/kvm opens for
// reading and writing (it exists and we may use it), and the CPU has
// hardware virtualisation (vmx or svm). Either alone is not enough: a
// nested host can expose /dev/kvm without the flags working, and the flags
// mean nothing without the module loaded.
func kvmUsable(root string) bool {
	f, err := os.OpenFile(filepath.Join(root, "dev/kvm"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return cpuHasVirtualization(filepath.Join(root, "proc/cpuinfo"))
}

func cpuHasVirtualization(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		name, flags, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != "flags" {
			continue
		}
		for _, f := range strings.Fields(flags) {
			if f == "vmx" || f == "svm" {
				return true
			}
		}
	}
	return false
}
