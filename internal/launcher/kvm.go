package launcher

import (
	"bufio"
	"os"
	"strings"
)

// KVMUsable reports whether guests can use KVM here: /dev/kvm must open
// read-write and the CPU must advertise vmx or svm (a /dev/kvm node alone
// exists in containers and on hosts without nested virtualisation). The
// reason says why not.
func KVMUsable() (bool, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false, "/dev/kvm: " + err.Error()
	}
	_ = f.Close()
	ok, err := cpuHasVirt("/proc/cpuinfo")
	if err != nil {
		return false, "/proc/cpuinfo: " + err.Error()
	}
	if !ok {
		return false, "the CPU has no vmx or svm flag"
	}
	return true, ""
}

func cpuHasVirt(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		for _, flag := range strings.Fields(line) {
			if flag == "vmx" || flag == "svm" {
				return true, nil
			}
		}
	}
	return false, s.Err()
}
