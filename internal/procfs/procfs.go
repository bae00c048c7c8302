// Package procfs reads what benchmarks and end-to-end tests need to know
// about host processes from /proc: liveness, CPU time, memory, command
// lines, the QEMU of a domain and the guest RAM it touched.
package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// CPUSeconds returns the user plus system CPU time pid has used, from
// fields 14 and 15 of /proc/<pid>/stat.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields are counted
	// after its closing parenthesis, which is field 2's end.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

// ProcStatus reads kB fields (VmRSS, VmHWM, RssAnon, ...) of
// /proc/<pid>/status; absent keys are left out.
func ProcStatus(pid int, keys ...string) (map[string]int64, error) {
	return kbFields(fmt.Sprintf("/proc/%d/status", pid), keys)
}

// Pss returns the proportional set size of pid in kB (shared pages divided
// among the processes that map them), from /proc/<pid>/smaps_rollup.
func Pss(pid int) (int64, error) {
	m, err := kbFields(fmt.Sprintf("/proc/%d/smaps_rollup", pid), []string{"Pss"})
	if err != nil {
		return 0, err
	}
	v, ok := m["Pss"]
	if !ok {
		return 0, fmt.Errorf("/proc/%d/smaps_rollup has no Pss", pid)
	}
	return v, nil
}

// Private returns the memory only pid maps, in kB: Private_Clean plus
// Private_Dirty of /proc/<pid>/smaps_rollup (its own heap and stacks, and
// the pages of shared files it wrote to). It is what the process costs
// the host beyond what it shares with others.
func Private(pid int) (int64, error) {
	m, err := kbFields(fmt.Sprintf("/proc/%d/smaps_rollup", pid), []string{"Private_Clean", "Private_Dirty"})
	if err != nil {
		return 0, err
	}
	c, okc := m["Private_Clean"]
	d, okd := m["Private_Dirty"]
	if !okc || !okd {
		return 0, fmt.Errorf("/proc/%d/smaps_rollup has no Private_Clean or Private_Dirty", pid)
	}
	return c + d, nil
}

func kbFields(path string, keys []string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !want[k] {
			continue
		}
		if fs := strings.Fields(v); len(fs) > 0 {
			n, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %q: %w", path, k, fs[0], err)
			}
			out[k] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// Alive reports whether pid runs (a zombie does not).
func Alive(pid int) bool {
	s := State(pid)
	return s != 0 && s != 'Z' && s != 'X'
}

// State is pid's state letter from /proc/<pid>/stat (R, S, T for stopped,
// Z for a zombie ...), 0 when there is no such process.
func State(pid int) byte {
	if f := statFields(pid); len(f) > 0 {
		return f[0][0]
	}
	return 0
}

// SessionID is pid's session, -1 when there is no such process.
func SessionID(pid int) int {
	if f := statFields(pid); len(f) > 3 {
		if sid, err := strconv.Atoi(f[3]); err == nil {
			return sid
		}
	}
	return -1
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which may hold spaces and parentheses): state, ppid, pgrp, session, ...
func statFields(pid int) []string {
	if pid <= 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// PidsOf lists the live processes running binary (their argv[0]).
func PidsOf(binary string) []int {
	var out []int
	for _, pid := range pids() {
		if args := cmdline(pid); len(args) > 0 && args[0] == binary && Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// PidsWithArg lists the live processes other than this one with an
// argument that contains s (a config file's path: a daemon's -c and any
// CLI still using it).
func PidsWithArg(s string) []int {
	var out []int
	for _, pid := range pids() {
		if pid == os.Getpid() {
			continue
		}
		if slices.ContainsFunc(cmdline(pid), func(a string) bool { return strings.Contains(a, s) }) && Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// QEMUPid is the QEMU process of a running qemu:///system domain, from
// libvirtd's pid file; 0 when there is none.
func QEMUPid(domain string) int {
	b, err := os.ReadFile(filepath.Join("/run/libvirt/qemu", domain+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !Alive(pid) {
		return 0
	}
	return pid
}

// pids lists the numeric entries of /proc.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// cmdline returns the arguments of pid, nil when it is gone.
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// Launchers maps domain name to the pid of the live launcher process of
// binary (its absolute path) serving it, for domains whose name starts with
// prefix.
func Launchers(binary, prefix string) map[string]int {
	out := map[string]int{}
	eachLauncher(binary, func(pid int, domain string) {
		if strings.HasPrefix(domain, prefix) {
			out[domain] = pid
		}
	})
	return out
}

// LauncherPids lists the live launcher processes of binary serving domain:
// one, unless something went wrong.
func LauncherPids(binary, domain string) []int {
	return launcherPids(binary, func(d string) bool { return d == domain })
}

// LauncherPidsWithPrefix lists every live launcher of binary whose domain
// name starts with prefix: all of them, where several share a domain name
// (a migration's source and target launchers, on two hosts).
func LauncherPidsWithPrefix(binary, prefix string) []int {
	return launcherPids(binary, func(d string) bool { return strings.HasPrefix(d, prefix) })
}

func launcherPids(binary string, match func(domain string) bool) []int {
	var out []int
	eachLauncher(binary, func(pid int, d string) {
		if match(d) {
			out = append(out, pid)
		}
	})
	return out
}

// LauncherPidsOn lists every live launcher of binary that drives the
// libvirtd at libvirtURI (its --libvirt-uri): one node's launchers, where
// several nodes run on one machine.
func LauncherPidsOn(binary, libvirtURI string) []int {
	var out []int
	eachLauncher(binary, func(pid int, _ string) {
		args := cmdline(pid)
		for i := 2; i+1 < len(args); i++ {
			if args[i] == "--libvirt-uri" && args[i+1] == libvirtURI {
				out = append(out, pid)
				return
			}
		}
	})
	return out
}

// eachLauncher calls fn for every live launcher process of binary, which
// run as `<binary> serve ... --domain-name <domain>`.
func eachLauncher(binary string, fn func(pid int, domain string)) {
	for _, pid := range pids() {
		args := cmdline(pid)
		if len(args) < 2 || args[0] != binary || args[1] != "serve" || !Alive(pid) {
			continue
		}
		for i := 2; i+1 < len(args); i++ {
			if args[i] == "--domain-name" {
				fn(pid, args[i+1])
				break
			}
		}
	}
}

// PidsByComm returns the live processes whose /proc/<pid>/comm is name
// (daemons such as libvirtd and virtlogd).
func PidsByComm(name string) []int {
	var out []int
	for _, pid := range pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == name && Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Threads returns the number of threads of pid (0 when it is gone).
func Threads(pid int) int {
	m, err := kbFields(fmt.Sprintf("/proc/%d/status", pid), []string{"Threads"})
	if err != nil {
		return 0
	}
	return int(m["Threads"])
}

// MemAvailableKiB is the host's MemAvailable from /proc/meminfo, in kB.
func MemAvailableKiB() int64 { return memInfoKiB("MemAvailable") }

// MemTotalKiB is the host's memory, 0 when it cannot be read.
func MemTotalKiB() int64 { return memInfoKiB("MemTotal") }

func memInfoKiB(key string) int64 {
	m, err := kbFields("/proc/meminfo", []string{key})
	if err != nil {
		return 0
	}
	return m[key]
}

// ChildPids lists the children of pid, from every thread's
// /proc/<pid>/task/<tid>/children.
func ChildPids(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// Comm is the command name of pid (up to 15 characters).
func Comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LoadAvg1 is the host's 1-minute load average, "" when unreadable.
func LoadAvg1() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
