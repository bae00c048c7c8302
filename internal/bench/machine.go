package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

// Machine describes where the figures were measured.
type Machine struct {
	Date           time.Time `json:"date"`
	Cores          int       `json:"cores"`
	CPUModel       string    `json:"cpu_model"`
	MemoryKiB      int64     `json:"memory_kib"`
	Kernel         string    `json:"kernel"`
	Accel          string    `json:"accel"` // "KVM" or "TCG (software emulation)"
	LibvirtVersion string    `json:"libvirt_version"`
	QEMUVersion    string    `json:"qemu_version"`
	GoVersion      string    `json:"go_version"`
	Commit         string    `json:"commit"`
	DataDisk       string    `json:"data_disk"` // file system the agents' data dirs are on
}

// DescribeMachine reads the host facts; libvirt and QEMU versions come from
// the caller (package bench/virt), dataDir is where agents keep etcd.
func DescribeMachine(ctx context.Context, libvirtVersion, qemuVersion, dataDir string) Machine {
	m := Machine{
		Date: time.Now().UTC(), Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
		LibvirtVersion: libvirtVersion, QEMUVersion: qemuVersion, Accel: "TCG (software emulation)",
	}
	if kvmUsable() {
		m.Accel = "KVM"
	}
	m.CPUModel = cpuinfoField("model name")
	m.MemoryKiB = procfs.MemTotalKiB()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "df", "--output=fstype,source", dataDir).Output(); err == nil {
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) == 2 {
			m.DataDisk = strings.Join(strings.Fields(lines[1]), " on ")
		}
	}
	return m
}

// kvmUsable is the node agent's test: /dev/kvm opens read-write and the
// CPU advertises vmx or svm.
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	flags := " " + cpuinfoField("flags") + " "
	return strings.Contains(flags, " vmx ") || strings.Contains(flags, " svm ")
}

func cpuinfoField(name string) string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
