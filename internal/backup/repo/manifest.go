package repo

import (
	"encoding/json"
	"time"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// Class kinds of a volume (Volume.ClassKind): which storage class kind
// it was backed up from, which decides how it is restored.
const (
	ClassKindLocal            = "local"
	ClassKindRBD              = "rbd"
	ClassKindSharedFilesystem = "shared_filesystem"
)

// Manifest is one backup: the VM it is of, what a restore needs to make
// the VM again (its spec), and each volume's chunks. It is
// self-contained: a restore needs nothing but it and the chunks it
// names.
type Manifest struct {
	// Format is FormatVersion; PutManifest sets it.
	Format int `json:"format"`
	// ID is the backup's id, a UUID.
	ID string `json:"id"`
	// Cluster is a free label naming the cluster the backup was made
	// in (a label value: at most 63 of [A-Za-z0-9._-]), or "".
	Cluster string `json:"cluster,omitempty"`
	// VMNamespace, VMName and VMUID are the VM's (namespace may be "").
	VMNamespace string `json:"vmNamespace,omitempty"`
	VMName      string `json:"vmName"`
	VMUID       string `json:"vmUID"`
	// Created is when the backup was taken (its consistency point).
	Created time.Time `json:"created"`
	// Labels are the backup's labels (the schedule that made it, ...),
	// by Kubernetes' label rules.
	Labels map[string]string `json:"labels,omitempty"`
	// Spec is the VM as protojson: what a restore makes again.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Volumes are the VM's persistent volumes that were backed up.
	Volumes []Volume `json:"volumes"`
}

// Volume is one volume of a backup: its chunks in order.
type Volume struct {
	// Name is the volume's name in the VM spec.
	Name string `json:"name"`
	// StorageClass is the name of its class, ClassKind that class's kind
	// (ClassKindLocal, ClassKindRBD, ClassKindSharedFilesystem).
	StorageClass string `json:"storageClass"`
	ClassKind    string `json:"classKind"`
	// SizeBytes is the volume's size; ChunkSize the size of each chunk
	// (the last one may be shorter).
	SizeBytes int64 `json:"sizeBytes"`
	ChunkSize int64 `json:"chunkSize"`
	// Chunks are the hex sha256 of each chunk's uncompressed bytes, in
	// order; "" is a chunk of zeros, never stored. There are
	// ceil(SizeBytes/ChunkSize) of them.
	Chunks []string `json:"chunks"`
	// Parent is the id of the backup this one was written on (its base),
	// or "": for the record only, a restore never needs it.
	Parent string `json:"parent,omitempty"`
	// Snapshot is the RBD snapshot an rbd volume's backup was exported
	// from (the diff's end snapshot, set by WriteRBDDiff): the next
	// incremental backup's export-diff must start --from-snap it, which
	// WriteRBDDiff checks.
	Snapshot string `json:"snapshot,omitempty"`
}

// ManifestInfo is what a listing says of a backup.
type ManifestInfo struct {
	ID          string
	Cluster     string
	VMNamespace string
	VMName      string
	VMUID       string
	Created     time.Time
	Labels      map[string]string
	// SizeBytes is the sum of the volumes' sizes; DataBytes that of
	// their non-zero chunks (what a restore writes, uncompressed).
	SizeBytes int64
	DataBytes int64
	Volumes   int
	// Key is the manifest's object key.
	Key string
}
