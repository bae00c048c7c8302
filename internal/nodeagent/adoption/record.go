package adoption

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/virtplane/terraform-provider-virtplane/internal/adopt"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

// recordFile is the node's record of an adopted VM, in the VM's
// directory (written by the node alone, 0600; removed with the VM's
// directory when the VM is deleted).
const recordFile = "adopted.json"

// Record is what the node keeps of the domain a VM adopted: which
// instance takes it over, and the files the VM's volumes are copied from
// at its first start through virtplane. It is what decides, never the
// API: an annotation on a VM names an adoption, but only the node that
// mapped the domain and wrote this record takes it over or copies its
// files.
type Record struct {
	// Adoption is the adoption's uid; Namespace and Name the VM's.
	Adoption  string `json:"adoption"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	VMUID     string `json:"vm_uid"`
	// VMIUID is the one instance that takes the domain over.
	VMIUID string `json:"vmi_uid"`
	Domain string `json:"domain"`
	UUID   string `json:"uuid"`
	// State is claimed (the instance is taking it over), taken (its
	// launcher did) or failed (Message says why).
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
	QEMUPid int    `json:"qemu_pid,omitempty"`
	// Disks are the files the volumes are copied from (real paths,
	// checked when mapped and again when copied).
	Disks []adopt.Disk `json:"disks"`
	// NVRAM is the EFI variable store copied at the first start, "" for
	// none.
	NVRAM string `json:"nvram,omitempty"`
}

// Record states.
const (
	stateClaimed = "claimed"
	stateTaken   = "taken"
	stateFailed  = "failed"
)

// maxRecord bounds what is read back: a record lists a domain's disks.
const maxRecord = 1 << 20

// readRecord reads the record in VM directory dir; nil when there is
// none.
func readRecord(dir string) (*Record, error) {
	f, err := os.Open(filepath.Join(dir, recordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecord {
		return nil, fmt.Errorf("reading %s: more than %d bytes", f.Name(), maxRecord)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	return &r, nil
}

// writeRecord writes r into VM directory dir, atomically.
func writeRecord(dir string, r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, recordFile), b, 0o600)
}
