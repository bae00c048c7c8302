package nodedir

import (
	"os"
	"path/filepath"
)

// Backups' scratch space:
//
//	<root>/backups/<backup or restore uid>/  one backup's or backup restore's work
//	    <volume>.raw                          a volume as a raw sparse file, read
//	                                          for an upload or written by a restore
//
// Removed when the work ends; a directory whose object is gone is removed
// by the next collection.
const backupsDir = "backups"

// BackupsDir holds the scratch directories of backups and restores.
func (l Layout) BackupsDir() string { return filepath.Join(l.Root, backupsDir) }

// BackupWorkDir is the scratch directory of the backup or backup restore
// with uid (checked: a UUID).
func (l Layout) BackupWorkDir(uid string) (string, error) {
	if err := checkUID("backup", uid); err != nil {
		return "", err
	}
	return filepath.Join(l.Root, backupsDir, uid), nil
}

// BackupRawPath is volume's raw file in the scratch directory of uid.
func (l Layout) BackupRawPath(uid, volume string) (string, error) {
	dir, err := l.BackupWorkDir(uid)
	if err != nil {
		return "", err
	}
	return FileIn(dir, volume+".raw")
}

// RemoveBackupWorkDir removes the scratch directory of uid, through an
// os.Root (no symlink leads out).
func (l Layout) RemoveBackupWorkDir(uid string) error {
	if err := checkUID("backup", uid); err != nil {
		return err
	}
	err := l.removeAll(filepath.Join(backupsDir, uid))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
