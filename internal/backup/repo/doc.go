// Package repo is virtplane's backup repository: where backups of VM
// volumes live off the node, and the format they are kept in.
//
// A repository is a Store: a directory on a mounted filesystem (OpenDir;
// NFS in production) or a prefix of an S3 bucket (OpenS3; tested against
// Ceph's radosgw). Its objects are
//
//	chunks/<hh>/<sha256>          one chunk of some volume, zstd-compressed;
//	                              named by the sha256 of its UNcompressed
//	                              bytes (hh: the first two hex digits)
//	manifests/<id>.<sha256>.json  one backup: the VM's spec and, per
//	                              volume, the chunk names in order; named
//	                              by its id (a UUID) and the sha256 of the
//	                              object's own bytes
//	locks/<uuid>                  a backup being written (Lock), which GC
//	                              keeps the chunks of
//
// Chunks are shared by every backup in the repository: a chunk whose
// bytes are already stored is not uploaded again (deduplication), which
// is what makes the second backup of a local volume incremental, and an
// RBD export-diff (WriteRBDDiff) touches only the chunks the diff names,
// so an rbd volume's incremental backup reads only what changed. Each
// manifest names every chunk of every volume, so it is self-contained:
// restoring needs that manifest and the chunks it names, never a parent,
// so any backup can be deleted without rebasing others, and another
// virtplane cluster pointed at the same target can list and restore it.
// GC deletes the chunks no manifest names, once they are older than a
// grace and no backup being written (Lock) may name them.
//
// A backup is written as: Lock, then WriteRaw or WriteRBDDiff for each
// volume, then PutManifest, then Unlock.
//
// Everything read back from a target is hostile until checked: keys are
// validated before they reach a Store, manifests are checked against
// their checksum and then field by field (ValidateManifest), and every
// chunk is decompressed within bounds and its hash compared before a
// byte of it is written to a volume (ErrCorrupt otherwise).
package repo
