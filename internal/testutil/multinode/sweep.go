package multinode

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ownerFile names the process that made a run (pid and start time, so a
// reused pid is not taken for it).
const ownerFile = "owner"

func writeOwner(dir string) error {
	st, err := startTime(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %s\n", os.Getpid(), st), 0o644)
}

// startTime is field 22 of /proc/<pid>/stat: when the process started,
// in clock ticks since boot.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f[19], nil
}

// ownerAlive reports whether the process that made the run in dir still
// runs. A dir without an owner yet is a run being made, unless it is old.
func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		fi, serr := os.Stat(dir)
		return serr == nil && time.Since(fi.ModTime()) < time.Minute
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return false
	}
	st, err := startTime(pid)
	return err == nil && st == f[1]
}

// sweepStale removes the runs whose test process died without cleaning
// up (go test's -timeout kills it): their processes, namespaces and dirs.
// Runs of live processes, other test packages' among them, are left
// alone.
func sweepStale(t Logger) {
	live, err := sweepDirs(t, runBase)
	// Namespaces whose run dir is gone: a run's dir is made before its
	// namespaces, and a cleanup that failed to delete them still removed
	// the dir.
	nss, _ := filepath.Glob(filepath.Join(netnsDir, nsPrefix+"*"))
	errs := []error{err}
	for _, ns := range nss {
		id, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(ns), nsPrefix), "-")
		if isRunID(id) && !live[id] {
			if _, err := os.Stat(filepath.Join(runBase, runDirPrefix+id)); errors.Is(err, os.ErrNotExist) {
				errs = append(errs, sweepRun(t, id, ""))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Logf("multinode: sweeping stale runs: %v", err)
	}
}

// sweepDirs sweeps the runs in base whose owner is gone and returns the
// ids of the live ones (in base, whatever their state).
func sweepDirs(t Logger, base string) (live map[string]bool, err error) {
	live = map[string]bool{}
	dirs, _ := filepath.Glob(filepath.Join(base, runDirPrefix+"*"))
	var errs []error
	for _, dir := range dirs {
		id := strings.TrimPrefix(filepath.Base(dir), runDirPrefix)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || !isRunID(id) {
			continue // not a run's
		}
		if ownerAlive(dir) {
			live[id] = true
			continue
		}
		errs = append(errs, sweepRun(t, id, dir))
	}
	return live, errors.Join(errs...)
}

// isRunID reports whether s has the form of a run id (newRun's).
func isRunID(s string) bool {
	if len(s) != runIDLen {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// sweepRun kills what runs in run id's namespaces (its nodes' daemons
// and QEMUs, and whatever runs in its hub: a Ceph cluster's daemons),
// deletes them and its host link, and removes dir ("" for none).
func sweepRun(t Logger, id, dir string) error {
	nss, _ := filepath.Glob(filepath.Join(netnsDir, nsPrefix+id+"-*"))
	var errs []error
	for _, ns := range nss {
		name := filepath.Base(ns)
		errs = append(errs, killNetNS(name, 15*time.Second), deleteNetNS(name))
	}
	// The veth pair goes with the hub's namespace; deleting it by name
	// also covers a hub namespace that something outside the run keeps.
	errs = append(errs, deleteLink(hostLinkName(id)))
	if dir != "" {
		errs = append(errs, removeRunDir(dir))
	}
	t.Logf("multinode: swept stale run %s (%d namespaces, dir %q)", id, len(nss), dir)
	return errors.Join(errs...)
}
