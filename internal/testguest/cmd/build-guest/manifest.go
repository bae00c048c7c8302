package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"path/filepath"

	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

const manifestFile = "manifest.json"

// dpkgStatus is dpkg's record of the installed packages.
const dpkgStatus = "/var/lib/dpkg/status"

// manifest records what an output was built from; Key covers every input,
// so an equal key means the outputs need not be rebuilt.
type manifest struct {
	Key           string              `json:"key"`
	FastKey       string              `json:"fast_key"`
	Kernel        debPackage          `json:"kernel_package"`
	Busybox       debPackage          `json:"busybox_package"`
	KernelRelease string              `json:"kernel_release"`
	Modules       map[string][]string `json:"modules"`
	Outputs       map[string]string   `json:"outputs"` // file -> sha256
	GoVersion     string              `json:"go_version"`
}

// inputKey hashes everything the outputs depend on that is known before
// downloading: the builder itself (its executable), the guest's /init,
// the exact package versions and those of the host's disk tools.
func inputKey(kernel, busybox debPackage, hostTools string) (string, error) {
	h, err := builderHash()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s\n", hostTools)
	if err := json.NewEncoder(h).Encode([]debPackage{kernel, busybox}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fastKey stands in for inputKey without asking apt, which takes over a
// second per query on hosts that keep no package cache: the package
// versions cannot have changed while the package lists have not.
func fastKey(o options) (string, error) {
	lists := aptListsFingerprint()
	if lists == "" {
		return "", nil
	}
	h, err := builderHash()
	if err != nil {
		return "", err
	}
	// Installed packages (the disk tools) change only with dpkg's status.
	status, err := os.Stat(dpkgStatus)
	if err != nil {
		return "", nil
	}
	fmt.Fprintf(h, "%s\n%s\n%s\n%d %d\n", o.kernelPkg, o.bbPkg, lists, status.Size(), status.ModTime().UnixNano())
	return hex.EncodeToString(h.Sum(nil)), nil
}

func builderHash() (hash.Hash, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the builder executable: %w", err)
	}
	exeSum, err := fileSHA256(exe)
	if err != nil {
		return nil, fmt.Errorf("hashing the builder: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "v%d\n%s\n%s\n%s\n", builderVersion, exeSum, testguest.InitScript, testguest.GuestAgentScript)
	return h, nil
}

// upToDate reports whether out holds outputs built with key (or fast
// key), intact.
func upToDate(out, key string) bool {
	if key == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(out, manifestFile))
	if err != nil {
		return false
	}
	var m manifest
	if json.Unmarshal(b, &m) != nil || (m.Key != key && m.FastKey != key) || len(m.Outputs) == 0 {
		return false
	}
	for f, want := range m.Outputs {
		if got, err := fileSHA256(filepath.Join(out, f)); err != nil || got != want {
			return false
		}
	}
	return true
}

// refreshFastKey records a new fast key in an up-to-date manifest, so the
// next run skips apt again (the package lists changed, the versions not).
func refreshFastKey(out, fast string) error {
	p := filepath.Join(out, manifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	if m.FastKey == fast {
		return nil
	}
	m.FastKey = fast
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(p, append(mb, '\n'), 0o644)
}
