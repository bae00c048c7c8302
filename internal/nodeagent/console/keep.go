package console

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// keptConsoleLogs is how many ended instances' console logs a VM keeps on
// a node: the last one, and the one before it for comparison.
const keptConsoleLogs = 2

// Keep moves the console log of the ending VMI rec, with its
// rotated files, under its VM's directory, where it outlives the VMI's
// own directory, and drops all but the newest keptConsoleLogs there. A
// bare VMI keeps nothing. Moving is idempotent: a retried cleanup finds
// nothing left to move.
func (s *Server) Keep(rec *state.VMI) error {
	if rec.VMUID == "" {
		return nil
	}
	if err := s.opts.Layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		return fmt.Errorf("keeping console log: %w", err)
	}
	dst, err := s.opts.Layout.KeptLogDir(rec.VMUID, rec.UID)
	if err != nil {
		return fmt.Errorf("keeping console log: %w", err)
	}
	names, err := logFiles(nodedir.ConsoleLogPath(rec.Dir))
	if err != nil || len(names) == 0 {
		return err
	}
	// The VM's directory with its vm.json, by which the directory is
	// removed once the VM is deleted. The VMI is named after its VM.
	if err := s.opts.Layout.EnsureVMDir(rec.VMUID, rec.Namespace, rec.Name); err != nil {
		return fmt.Errorf("keeping console log: %w", err)
	}
	// 0700: guest output may hold secrets.
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return fmt.Errorf("keeping console log: %w", err)
	}
	for _, n := range names {
		// Same file system (both under the node data dir): a rename,
		// which also leaves open readers (a following console) reading.
		if err := os.Rename(n, filepath.Join(dst, filepath.Base(n))); err != nil {
			return fmt.Errorf("keeping console log: %w", err)
		}
	}
	return s.pruneKeptLogs(rec.VMUID, keptConsoleLogs, rec.UID)
}

type keptLog struct {
	uid   string
	mtime time.Time
}

// keptLogs lists the kept instance logs under base, newest first.
func keptLogs(base string) ([]keptLog, error) {
	ents, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing kept console logs: %w", err)
	}
	var out []keptLog
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, keptLog{e.Name(), fi.ModTime()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].mtime.After(out[j].mtime) })
	return out, nil
}

// pruneKeptLogs removes all but the newest keep logs of VM vmUID; newest
// (the one just kept) always stays, whatever the clock says. An entry not
// named by a VMI uid is not one of ours and stays too.
func (s *Server) pruneKeptLogs(vmUID string, keep int, newest string) error {
	base, err := s.opts.Layout.KeptLogsDir(vmUID)
	if err != nil {
		return err
	}
	logs, err := keptLogs(base)
	if err != nil {
		return err
	}
	sort.SliceStable(logs, func(i, j int) bool { return logs[i].uid == newest && logs[j].uid != newest })
	var errs []error
	for _, l := range logs[min(keep, len(logs)):] {
		dir, err := s.opts.Layout.KeptLogDir(vmUID, l.uid)
		if err != nil {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing old console log: %w", err))
		}
	}
	return errors.Join(errs...)
}

// keptLogPath returns the kept console log of VMI vmiUID of VM vmUID, or,
// when that is not kept (or vmiUID is empty), the newest kept one; "" if
// there is none. The uids come from the session the API sent; one that is
// not a uid is an error, never a path to read.
func (s *Server) keptLogPath(vmUID, vmiUID string) (string, error) {
	if vmUID == "" {
		return "", nil
	}
	if vmiUID != "" {
		dir, err := s.opts.Layout.KeptLogDir(vmUID, vmiUID)
		if err != nil {
			return "", err
		}
		p := nodedir.ConsoleLogPath(dir)
		if names, err := logFiles(p); err == nil && len(names) > 0 {
			return p, nil
		}
	}
	base, err := s.opts.Layout.KeptLogsDir(vmUID)
	if err != nil {
		return "", err
	}
	logs, err := keptLogs(base)
	if err != nil || len(logs) == 0 {
		return "", err
	}
	for _, l := range logs {
		if dir, err := s.opts.Layout.KeptLogDir(vmUID, l.uid); err == nil {
			return nodedir.ConsoleLogPath(dir), nil
		}
	}
	return "", nil
}
